"""The exercises: write a backward pass yourself and have it checked (docs/exercises.md)."""
