"""Stands for a model whose environment lacks Pillow: importing it fails as `import PIL` does there."""
raise ModuleNotFoundError("No module named 'PIL'", name="PIL")
