"""The inspector's dock: folded to the inspector's one-line strip until a
run starts or the user opens it, and opened to the height the user last
gave it (kept across sessions in the designer's settings).

A dock that sits open and empty takes 40% of the window from the canvas
for nothing; VS Code's panel and Node-RED's sidebar both fold away the same
way. The strip stays, so that the tabs (and their counts: "Problems (2)")
are one click away."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QEvent, QObject, QSettings, Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QApplication, QDockWidget, QMainWindow, QMenu, QWidget

from .inspector import TOGGLE_SHORTCUT, Inspector

HEIGHT_KEY = "inspector/height"
QWIDGETSIZE_MAX = (1 << 24) - 1
CARDS_HEIGHT = 380  # an open inspector holds an approval card's form at least this high
CARDS_SHARE = 0.55  # and grows to show a whole card, up to this share of the window's height
MIN_OPEN = 120  # an open inspector lower than this is no use; never remembered


class InspectorDock(QObject):
    def __init__(self, window: QMainWindow, dock: QDockWidget, inspector: Inspector,
                 settings: Callable[[], QSettings]) -> None:
        super().__init__(window)
        self.window = window
        self.dock = dock
        self.inspector = inspector
        self.settings = settings
        self._open = True
        self.opened_by_run = False
        dock.setWidget(inspector)
        # The strip is the title: a second line saying "Inspector" would
        # be the one thing the folded dock shows.
        dock.setTitleBarWidget(QWidget())
        dock.setFeatures(QDockWidget.DockWidgetFeature.NoDockWidgetFeatures)
        dock.setFloating(False)

        self.toggle_action = QAction("&Inspector", self)
        self.toggle_action.setCheckable(True)
        self.toggle_action.setShortcut(QKeySequence(TOGGLE_SHORTCUT))
        self.toggle_action.setStatusTip("Show or fold away the inspector at the bottom")
        self.toggle_action.triggered.connect(lambda on: self.open() if on else self.collapse())
        self._put_action_in_view_menu()
        inspector.collapse_requested.connect(lambda fold: self.collapse() if fold else self.open())
        dock.installEventFilter(self)
        dock.show()
        self.collapse()
        self._host_cards()

    def _put_action_in_view_menu(self) -> None:
        """In the View menu, where the dock's own show/hide entry was."""
        old = self.dock.toggleViewAction()
        bar = self.window.menuBar()
        for top in bar.actions():
            menu: QMenu | None = top.menu()
            if menu is not None and old in menu.actions():
                menu.insertAction(old, self.toggle_action)
                menu.removeAction(old)
                return
        self.window.addAction(self.toggle_action)  # the shortcut works all the same

    # -- state --------------------------------------------------------------
    @property
    def is_open(self) -> bool:
        return self._open

    def height(self) -> int:
        """What opening gives: the user's last height, or about a third of
        the window the first time."""
        value: Any = self.settings().value(HEIGHT_KEY, 0)
        try:
            remembered = int(value)
        except (TypeError, ValueError):
            remembered = 0
        if remembered >= MIN_OPEN:
            return remembered
        return max(240, int(self.window.height() * 0.36))

    def open(self, *, by_run: bool = False) -> None:
        """``by_run``: a run (or a refused one) opened it, not the user; it
        folds again when that run's results leave (see fold_after_run)."""
        if self._open:
            return
        self.opened_by_run = by_run
        height = self.height()  # before the dock grows and its first size is remembered
        self._open = True
        self.dock.show()
        self.dock.setMaximumHeight(QWIDGETSIZE_MAX)
        self.inspector.set_collapsed(False)
        self.window.resizeDocks([self.dock], [height], Qt.Orientation.Vertical)
        self.toggle_action.setChecked(True)

    def collapse(self) -> None:
        if not self._open:
            return
        self._open = False
        self.inspector.set_collapsed(True)
        self._fit_strip()
        self.toggle_action.setChecked(False)

    def _fit_strip(self) -> None:
        margins = self.dock.contentsMargins()
        height = self.inspector.strip_height() + margins.top() + margins.bottom()
        self.dock.setMaximumHeight(height)
        self.dock.resize(self.dock.width(), height)
        self.window.resizeDocks([self.dock], [height], Qt.Orientation.Vertical)

    def fold_after_run(self) -> None:
        """The run's results are gone (another flow is on screen): fold the
        inspector if the run opened it; if the user did, it stays open."""
        if self._open and self.opened_by_run:
            self.collapse()

    def toggle(self) -> None:
        if self._open:
            self.collapse()
        else:
            self.open()

    # -- a person in the loop -------------------------------------------------
    def _host_cards(self) -> None:
        """The cards of the window's runs: the run controller's People asks,
        the inspector shows the card, and the dock opens and raises it and
        the status bar says what the run waits for."""
        from ...control.run_controller import RunController

        cards = self.inspector.cards
        cards.attention.connect(self._card_came)
        cards.cleared.connect(self._cards_gone)
        controller = self.window.findChild(RunController)
        if controller is not None:
            cards.attach(controller.people)

    def _card_came(self, what: str) -> None:
        self.open(by_run=True)
        # An approval card needs room for its form and buttons: the whole
        # card where the window allows, the canvas keeping the rest.
        margins = self.dock.contentsMargins()
        wanted = (self.inspector.strip_height() + self.inspector.cards.wanted_height()
                  + margins.top() + margins.bottom())
        height = max(CARDS_HEIGHT, min(wanted, int(self.window.height() * CARDS_SHARE)))
        if self.window.height() and self.dock.height() < height:
            self.window.resizeDocks([self.dock], [height], Qt.Orientation.Vertical)
        self.dock.raise_()
        QApplication.alert(self.window)  # the taskbar asks for attention if elsewhere
        self.window.statusBar().showMessage(what)

    def _cards_gone(self) -> None:
        self.window.statusBar().clearMessage()

    # -- remembering the height -------------------------------------------------
    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt override
        if obj is not self.dock:
            return False
        if event.type() == QEvent.Type.Show and not self._open:
            # Sized before the window was shown, the dock came up at the
            # height of its contents: fold it again now that it is laid out.
            self._fit_strip()
        elif event.type() == QEvent.Type.Resize and self._open and self.dock.isVisible() \
                and self.dock.height() >= MIN_OPEN:
            self.settings().setValue(HEIGHT_KEY, self.dock.height())
        return False
