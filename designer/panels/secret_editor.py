"""The editor of a secret param: a reference to where the secret is kept
(a stored credential, an environment variable or a keyring entry), never
the secret itself, and the Credentials button that picks a stored one."""

from __future__ import annotations

import os
import re
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLineEdit, QToolButton, QWidget

from runtime.spec import ParamSpec

from .editor_base import ValueEditor, muted_label
from .json_editor import INVALID, mono_font

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


#: The keyring service of the credentials the Credentials dialog stores.
CREDENTIALS_SERVICE = "switchboard"


def stored_credential(value: Any) -> str | None:
    """The name of the stored credential a secret param names, or None."""
    if isinstance(value, dict) and value.get("keyring") == CREDENTIALS_SERVICE \
            and set(value) <= {"keyring", "username"}:
        return str(value.get("username") or "") or None
    return None


def pick_credential(parent: QWidget | None, current: str | None) -> str | None:
    """Open the Credentials dialog to pick (or first add) a stored credential;
    its name, or None if the user closed the dialog."""
    from designer.dialogs.credentials_dialog import open_credentials_dialog

    return open_credentials_dialog(parent, current)


def credentials_button(parent: QWidget, tip: str) -> QToolButton:
    button = QToolButton(parent)
    button.setObjectName("credentialsButton")
    button.setText("Credentials…")
    button.setToolTip(tip)
    button.setCursor(Qt.CursorShape.PointingHandCursor)
    return button


class SecretEditor(ValueEditor):
    """A secret is a reference: a stored credential's name (the Credentials
    dialog keeps the secret in the system keyring), an environment variable
    name, or a keyring service and user. There is deliberately no field for
    the secret itself."""

    merge = False  # each finished field is its own step

    def __init__(self, spec: ParamSpec, parent: QWidget | None = None) -> None:
        super().__init__(spec, parent)
        self.kind = QComboBox(self)
        self.kind.addItem("Environment variable", "env")
        self.kind.addItem("Keyring entry", "keyring")
        self.kind.addItem("Stored credential", "stored")
        self.credentials_button = credentials_button(
            self, "Pick a stored API key or password, or store a new one, in the system "
                  "keyring; the flow keeps only its name")
        self.credentials_button.clicked.connect(self._on_credentials)
        self.stored = QLineEdit(self)
        self.stored.setReadOnly(True)
        self.stored.setPlaceholderText("None yet: click Credentials…")
        self.env = QLineEdit(self)
        self.env.setPlaceholderText("Variable name, e.g. SMTP_PASSWORD")
        self.service = QLineEdit(self)
        self.service.setPlaceholderText("Keyring service, e.g. switchboard-smtp")
        self.username = QLineEdit(self)
        self.username.setPlaceholderText("User name in the keyring")
        for e in (self.stored, self.env, self.service, self.username):
            e.setFont(mono_font())
        self.status = muted_label("", self)
        self.note = muted_label("Only this name is saved in the flow, never the secret.", self)
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.kind)
        row.addStretch(1)
        self.layout_.addLayout(row)
        # The name field of the kind shown, with the button that picks a
        # stored credential beside it (one line, whatever the kind).
        field = QHBoxLayout()
        field.setContentsMargins(0, 0, 0, 0)
        field.setSpacing(6)
        for e in (self.stored, self.env, self.service):
            field.addWidget(e, 1)
        field.addWidget(self.credentials_button)
        self.layout_.addLayout(field)
        for w in (self.username, self.status, self.note):
            self.layout_.addWidget(w)
        self.kind.activated.connect(self._on_kind)
        # Applied when editing finishes, not per keystroke: someone who types
        # the secret itself here by mistake must not leave a prefix of it in
        # the flow on the way to the refusal.
        for e in (self.env, self.service, self.username):
            e.textEdited.connect(self._update_status)
            e.editingFinished.connect(self._on_edit)
        self._show_kind("env")

    def _on_credentials(self) -> None:
        current = stored_credential(self.value()) if self.value() is not INVALID else None
        name = pick_credential(self.window(), current)
        if not name:
            return
        value = {"keyring": CREDENTIALS_SERVICE, "username": name}
        self.set_value(value)
        self.value_changed.emit(value)

    def _show_kind(self, kind: str) -> None:
        self.stored.setVisible(kind == "stored")
        self.env.setVisible(kind == "env")
        self.service.setVisible(kind == "keyring")
        self.username.setVisible(kind == "keyring")
        self._update_status()

    def _on_kind(self, _index: int) -> None:
        kind = self.kind.currentData()
        self._show_kind(kind)
        if kind == "stored" and not self.stored.text():
            self._on_credentials()  # nothing to show yet: pick one right away
            if self.stored.text():
                return  # applied by the pick
        value = self.value()
        if value is not INVALID:
            self.value_changed.emit(value)

    def _on_edit(self) -> None:
        self._update_status()
        value = self.value()
        if value is not INVALID:
            self.value_changed.emit(value)

    def _update_status(self, _text: str = "") -> None:
        if self.kind.currentData() == "env":
            name = self.env.text().strip()
            if not name:
                self.status.setText("")
            elif not _ENV_NAME.match(name):
                self.status.setText("Not applied: a variable name has only letters, digits "
                                    "and _. Enter the variable's name, not the secret.")
            elif name != name.upper():
                self.status.setText("Variable names are usually UPPER_CASE: is this the name "
                                    "of the variable, not the secret itself?")
            elif name in os.environ:
                self.status.setText(f"✓ {name} is set in this environment")
            else:
                self.status.setText(f"{name} is not set in this environment; "
                                    "set it before you run the flow")
        else:
            self.status.setText("")
        self.status.setVisible(bool(self.status.text()))

    def value(self) -> Any:
        if self.kind.currentData() == "stored":
            name = self.stored.text().strip()
            return {"keyring": CREDENTIALS_SERVICE, "username": name} if name else None
        if self.kind.currentData() == "env":
            name = self.env.text().strip()
            if not name:
                return None
            return {"env": name} if _ENV_NAME.match(name) else INVALID
        service = self.service.text().strip()
        if not service:
            return None
        return {"keyring": service, "username": self.username.text().strip()}

    def set_value(self, value: Any) -> None:
        if self.value() == value:
            return
        name = stored_credential(value)
        if name is not None:
            self.kind.setCurrentIndex(self.kind.findData("stored"))
            self.stored.setText(name)
        elif value is None and self.kind.currentData() == "stored":
            self.stored.clear()
        elif isinstance(value, dict) and "keyring" in value:
            self.kind.setCurrentIndex(1)
            self.service.setText(str(value.get("keyring", "")))
            self.username.setText(str(value.get("username", "")))
        else:
            env = value.get("env", "") if isinstance(value, dict) else ""
            if value is None and self.kind.currentData() == "keyring":
                self.service.clear()
                self.username.clear()
            else:
                self.kind.setCurrentIndex(0)
                self.env.setText(str(env))
        self._show_kind(self.kind.currentData())
