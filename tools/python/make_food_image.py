"""Draws the small test image of the Python examples (docs/examples/food.jpg): a plate with a
few round "food" shapes, made with Pillow so the project needs no downloaded photo.

    .venv/bin/python tools/python/make_food_image.py [OUT]      # default docs/examples/food.jpg
"""

import sys
from pathlib import Path

from PIL import Image, ImageDraw, ImageFilter


def draw(size=160):
    img = Image.new("RGB", (size, size), (92, 64, 51))  # a wooden table
    d = ImageDraw.Draw(img)
    for y in range(0, size, 12):  # wood grain
        d.line([(0, y), (size, y + 6)], fill=(104, 72, 56), width=3)
    d.ellipse([12, 16, size - 12, size - 8], fill=(236, 236, 228), outline=(200, 200, 190), width=3)  # the plate
    d.ellipse([40, 44, 96, 96], fill=(214, 160, 60))  # fried egg yolk area / bread
    d.ellipse([52, 56, 84, 84], fill=(250, 196, 20))
    d.ellipse([88, 70, 128, 118], fill=(70, 140, 50))  # greens
    d.ellipse([46, 96, 90, 132], fill=(170, 40, 30))  # tomato
    d.rectangle([96, 40, 124, 62], fill=(150, 90, 50))  # meat
    return img.filter(ImageFilter.GaussianBlur(1.2))


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "docs" / "examples" / "food.jpg")
    draw().save(out, format="JPEG", quality=85, optimize=True)
    print(f"{out}: {out.stat().st_size} bytes")


if __name__ == "__main__":
    main()
