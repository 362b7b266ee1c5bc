"""SVG icons from resources/icons, tinted on demand and cached.

The SVGs are drawn with ``currentColor`` strokes so one file serves a white
glyph on a coloured node badge and a text-coloured glyph in a toolbar. A
node spec names its icon; an unknown name falls back to ``generic``."""

from __future__ import annotations

from functools import cache, lru_cache
from pathlib import Path

from PySide6.QtCore import QByteArray, QRectF, Qt
from PySide6.QtGui import QIcon, QImage, QPainter, QPixmap

ICON_DIR = Path(__file__).resolve().parents[2] / "resources" / "icons"

# Node specs may use names from other icon sets; map the common ones here.
ALIASES = {"ai": "agent", "llm": "agent", "sparkles": "agent", "email": "mail",
           "send": "mail", "debug": "bug", "timer": "clock", "delay": "clock",
           "inject": "play", "change": "edit", "catch": "shield", "web": "globe"}


@cache
def _svg_text(name: str) -> str | None:
    name = ALIASES.get(name, name)
    path = ICON_DIR / f"{name}.svg"
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None


@lru_cache(maxsize=512)
def image(name: str, color: str, size: int) -> QImage:
    """The icon as a premultiplied image of size x size device pixels."""
    from PySide6.QtSvg import QSvgRenderer  # QtSvg only when an icon is drawn

    text = _svg_text(name) or _svg_text("generic") or ""
    renderer = QSvgRenderer(QByteArray(text.replace("currentColor", color).encode()))
    img = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
    img.fill(Qt.GlobalColor.transparent)
    painter = QPainter(img)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter, QRectF(0, 0, size, size))
    painter.end()
    return img


def pixmap(name: str, color: str, size: int, dpr: float = 1.0) -> QPixmap:
    pm = QPixmap.fromImage(image(name, color, max(1, round(size * dpr))))
    pm.setDevicePixelRatio(dpr)
    return pm


def icon(name: str, color: str, size: int = 20) -> QIcon:
    ic = QIcon()
    for scale in (1, 2):
        ic.addPixmap(pixmap(name, color, size, scale))
    return ic
