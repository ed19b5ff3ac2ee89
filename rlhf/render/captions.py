"""Captions drawn into frames with a hand-made 5x7 bitmap font, so no font package is needed."""

from __future__ import annotations

import numpy as np

_GLYPHS: dict[str, str] = {
    "A": ".###. #...# #...# ##### #...# #...# #...#",
    "B": "####. #...# #...# ####. #...# #...# ####.",
    "C": ".###. #...# #.... #.... #.... #...# .###.",
    "D": "####. #...# #...# #...# #...# #...# ####.",
    "E": "##### #.... #.... ####. #.... #.... #####",
    "F": "##### #.... #.... ####. #.... #.... #....",
    "G": ".###. #...# #.... #.### #...# #...# .####",
    "H": "#...# #...# #...# ##### #...# #...# #...#",
    "I": ".###. ..#.. ..#.. ..#.. ..#.. ..#.. .###.",
    "L": "#.... #.... #.... #.... #.... #.... #####",
    "N": "#...# ##..# #.#.# #..## #...# #...# #...#",
    "R": "####. #...# #...# ####. #.#.. #..#. #...#",
    "T": "##### ..#.. ..#.. ..#.. ..#.. ..#.. ..#..",
    "0": ".###. #...# #..## #.#.# ##..# #...# .###.",
    "1": "..#.. .##.. ..#.. ..#.. ..#.. ..#.. .###.",
    "2": ".###. #...# ....# ...#. ..#.. .#... #####",
    " ": "..... ..... ..... ..... ..... ..... .....",
}
_GLYPH_W, _GLYPH_H = 5, 7


def _glyph(char: str) -> np.ndarray:
    rows = _GLYPHS.get(char.upper())
    if rows is None:
        raise ValueError(f"no caption glyph for {char!r}; available: {''.join(sorted(_GLYPHS))!r}")
    return np.array([[c == "#" for c in row] for row in rows.split()], dtype=bool)


def text_mask(text: str, scale: int = 1) -> np.ndarray:
    """Bitmap of ``text`` (upper-cased) as a bool array, one blank column between glyphs."""
    gap = np.zeros((_GLYPH_H, 1), dtype=bool)
    parts: list[np.ndarray] = []
    for i, char in enumerate(text):
        if i:
            parts.append(gap)
        parts.append(_glyph(char))
    mask = np.concatenate(parts, axis=1) if parts else np.zeros((_GLYPH_H, 0), dtype=bool)
    return mask.repeat(scale, axis=0).repeat(scale, axis=1)


def draw_caption(frames: np.ndarray, text: str, x0: int) -> None:
    """Draw ``text`` white on a darkened box at the top-left of the clip starting at column x0."""
    height, width = frames.shape[1:3]
    scale = max(1, height // 128)
    mask = text_mask(text, scale)
    pad = 2 * scale
    box_h = min(mask.shape[0] + 2 * pad, height)
    box_w = min(mask.shape[1] + 2 * pad, width - x0)
    box = frames[:, :box_h, x0 : x0 + box_w]
    box //= 3  # darken in place: readable on the light sky and on the dark floor
    glyphs = mask[: box_h - pad, : box_w - pad]
    box[:, pad : pad + glyphs.shape[0], pad : pad + glyphs.shape[1]][:, glyphs] = 255
