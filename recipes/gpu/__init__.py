"""The GPU run: recipes/gpu/run.sh and its carry (docs/training.md, "On a GPU")."""
