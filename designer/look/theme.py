"""Light and dark themes: one small set of colours that the widgets (through
a QPalette and a short style sheet) and the canvas items both read.

The palette is deliberately calm: neutral greys for chrome, a single blue
accent for selection and focus, category colours only as small accents on
nodes, and one colour that means "tools" everywhere (port, wire, badge)."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont, QGuiApplication, QPalette


@dataclass(frozen=True)
class Theme:
    name: str
    window: str
    panel: str
    base: str
    text: str
    muted: str
    border: str
    accent: str
    accent_text: str
    canvas: str
    grid: str
    grid_major: str
    node: str
    node_header: str
    node_border: str
    node_shadow: str
    wire: str
    wire_hover: str
    tools: str
    ai: str
    error: str
    warning: str
    running: str
    done: str
    refused: str

    @property
    def dark(self) -> bool:
        return self.name == "dark"

    def color(self, attr: str) -> QColor:
        return QColor(getattr(self, attr))


LIGHT = Theme(
    name="light",
    window="#eef0f3", panel="#f7f8fa", base="#ffffff", text="#1f2430", muted="#6b7280",
    border="#d9dde3", accent="#2f6fdf", accent_text="#ffffff",
    canvas="#f4f5f7", grid="#dfe2e8", grid_major="#d2d6de",
    node="#ffffff", node_header="#f7f8fa", node_border="#d3d8e0", node_shadow="#1f243014",
    wire="#98a1b0", wire_hover="#5b6577", tools="#7c5cd6", ai="#6a4fd0",
    error="#d64545", warning="#d9870b", running="#2f6fdf", done="#2e9e5b", refused="#d64545",
)

DARK = Theme(
    name="dark",
    window="#1b1d22", panel="#202329", base="#24272e", text="#e4e7ec", muted="#9aa2ae",
    border="#343842", accent="#5b93f0", accent_text="#0f1115",
    canvas="#17191d", grid="#25282f", grid_major="#2d3139",
    node="#262a31", node_header="#2c3038", node_border="#3b404b", node_shadow="#00000055",
    wire="#6d7584", wire_hover="#a3abb8", tools="#a48cf0", ai="#a48cf0",
    error="#ef6b6b", warning="#f0a73a", running="#5b93f0", done="#4cc47f", refused="#ef6b6b",
)

_current: Theme = LIGHT

#: Pinned data's colour (a pinned node's badge, its banner in Properties):
#: apart from the tools and AI violet, the run blue and the warning amber.
PINNED = {"light": "#c0398a", "dark": "#e879b9"}


def current() -> Theme:
    return _current


def system_prefers_dark() -> bool:
    app = QGuiApplication.instance()
    if app is None:
        return False
    try:
        return QGuiApplication.styleHints().colorScheme() == Qt.ColorScheme.Dark
    except AttributeError:  # Qt < 6.5
        return QGuiApplication.palette().window().color().lightness() < 128


def resolve(mode: str = "system") -> Theme:
    if mode == "dark":
        return DARK
    if mode == "light":
        return LIGHT
    return DARK if system_prefers_dark() else LIGHT


UI_FONT_FAMILIES = ["Inter", "Segoe UI", "SF Pro Text", "Noto Sans", "Cantarell", "Ubuntu",
                    "DejaVu Sans"]


def ui_font(point_size: float = 10, weight: QFont.Weight = QFont.Weight.Normal) -> QFont:
    font = QFont()
    font.setFamilies(UI_FONT_FAMILIES)
    font.setPointSizeF(point_size)
    font.setWeight(weight)
    return font


def apply(app, theme: Theme) -> None:
    """Set the application palette, font and style sheet for a theme."""
    global _current
    _current = theme
    if app.style().name().lower() != "fusion":
        app.setStyle("Fusion")  # once: a new style object repolishes every widget
    app.setFont(ui_font(10))
    pal = QPalette()
    c = QColor
    roles = {
        QPalette.ColorRole.Window: theme.window,
        QPalette.ColorRole.WindowText: theme.text,
        QPalette.ColorRole.Base: theme.base,
        QPalette.ColorRole.AlternateBase: theme.panel,
        QPalette.ColorRole.Text: theme.text,
        QPalette.ColorRole.Button: theme.panel,
        QPalette.ColorRole.ButtonText: theme.text,
        QPalette.ColorRole.Highlight: theme.accent,
        QPalette.ColorRole.HighlightedText: "#ffffff",
        QPalette.ColorRole.ToolTipBase: theme.base,
        QPalette.ColorRole.ToolTipText: theme.text,
        QPalette.ColorRole.PlaceholderText: theme.muted,
        QPalette.ColorRole.Mid: theme.border,
        QPalette.ColorRole.Midlight: theme.border,
        QPalette.ColorRole.Dark: theme.border,
        QPalette.ColorRole.Light: theme.base,
        QPalette.ColorRole.Shadow: theme.border,
        QPalette.ColorRole.Link: theme.accent,
    }
    for role, value in roles.items():
        pal.setColor(role, c(value))
    for role in (QPalette.ColorRole.Text, QPalette.ColorRole.WindowText,
                 QPalette.ColorRole.ButtonText):
        pal.setColor(QPalette.ColorGroup.Disabled, role, c(theme.muted))
    app.setPalette(pal)
    app.setStyleSheet(style_sheet(theme))


def style_sheet(t: Theme) -> str:
    # Only what the palette cannot say: flat docks and toolbars, roomy rows.
    return f"""
QMainWindow::separator {{ background: {t.border}; width: 1px; height: 1px; }}
QDockWidget {{ titlebar-close-icon: none; }}
QDockWidget::title {{ background: {t.panel}; padding: 7px 10px; border-bottom: 1px solid {t.border};
    text-align: left; }}
QToolBar {{ background: {t.panel}; border: none; border-bottom: 1px solid {t.border};
    padding: 3px 6px; spacing: 2px; }}
QToolBar::separator {{ background: {t.border}; width: 1px; margin: 6px 6px; }}
QToolButton {{ border: 1px solid transparent; border-radius: 6px; padding: 4px 6px; color: {t.text}; }}
QToolButton:hover {{ background: {t.window}; border-color: {t.border}; }}
QToolButton:pressed, QToolButton:checked {{ background: {t.border}; }}
QToolButton:disabled {{ color: {t.muted}; }}
QMenuBar {{ background: {t.panel}; border-bottom: 1px solid {t.border}; }}
QMenuBar::item {{ padding: 5px 10px; background: transparent; }}
QMenuBar::item:selected {{ background: {t.window}; border-radius: 4px; }}
QMenu {{ background: {t.base}; border: 1px solid {t.border}; padding: 4px; }}
QMenu::item {{ padding: 5px 24px 5px 12px; border-radius: 4px; }}
QMenu::item:selected {{ background: {t.accent}; color: #ffffff; }}
QMenu::separator {{ height: 1px; background: {t.border}; margin: 4px 6px; }}
QStatusBar {{ background: {t.panel}; border-top: 1px solid {t.border}; color: {t.muted}; }}
QStatusBar::item {{ border: none; }}
QLineEdit {{ background: {t.base}; border: 1px solid {t.border}; border-radius: 6px;
    padding: 5px 8px; selection-background-color: {t.accent}; }}
QLineEdit:focus {{ border-color: {t.accent}; }}
QTreeView, QListView {{ background: {t.panel}; border: none; outline: 0; }}
QTreeView::item, QListView::item {{ padding: 4px 2px; border-radius: 5px; }}
QTreeView::item:hover, QListView::item:hover {{ background: {t.window}; }}
QTreeView::item:selected, QListView::item:selected {{ background: {t.accent}; color: #ffffff; }}
QToolTip {{ background: {t.base}; color: {t.text}; border: 1px solid {t.border}; padding: 4px 6px; }}
QGraphicsView {{ border: none; }}
"""
