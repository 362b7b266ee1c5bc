"""Run > Model Prices…: the shipped table with the user's rows over it;
edits are saved to the user's price file and priced by the next run;
wrong input is named and nothing is written."""

from __future__ import annotations

import json

import pytest

from designer.dialogs.prices_dialog import EDITED, SHIPPED, YOURS, PricesDialog
from runtime import cost


@pytest.fixture
def dialog(qtbot, data_dir):
    d = PricesDialog()
    qtbot.addWidget(d)
    return d


def row_of(d: PricesDialog, model: str) -> int:
    return next(r for r in range(d.table.rowCount()) if d.table.item(r, 0).text() == model)


def test_lists_the_shipped_models(dialog):
    r = row_of(dialog, "gpt-4o-mini")
    assert [dialog.table.item(r, c).text() for c in range(5)] == [
        "gpt-4o-mini", "0.15", "0.60", "0.075", SHIPPED]
    assert dialog.table.rowCount() == len(cost.shipped_prices())


def test_an_edited_and_an_added_model_are_saved_and_priced(dialog):
    r = row_of(dialog, "gpt-4o-mini")
    dialog.table.item(r, 1).setText("0.30")
    assert dialog.table.item(r, 4).text() == EDITED
    dialog.add_row()
    new = dialog.table.rowCount() - 1
    dialog.table.item(new, 0).setText("my-local-llama")
    dialog.table.item(new, 1).setText("0.05")
    dialog.table.item(new, 2).setText("$0.10")
    assert dialog.save()
    saved = json.loads(cost.user_prices_path().read_text())["models"]
    assert saved == {"gpt-4o-mini": {"input": 0.3, "output": 0.6, "cached": 0.075},
                     "my-local-llama": {"input": 0.05, "output": 0.1}}
    # What the next run prices with: yours over the shipped table.
    assert cost.price_of("gpt-4o-mini")["input"] == 0.3
    usage = {"input_tokens": 1_000_000, "output_tokens": 1_000_000}
    assert cost.request_cost("my-local-llama", usage) == pytest.approx(0.15)
    # Shown as yours after the save, and the shipped rows stay shipped.
    assert dialog.table.item(row_of(dialog, "my-local-llama"), 4).text() == YOURS
    assert dialog.table.item(row_of(dialog, "gpt-4o"), 4).text() == SHIPPED


def test_reset_gives_a_shipped_model_its_price_back_and_removes_an_added_one(dialog):
    r = row_of(dialog, "gpt-4o")
    dialog.table.item(r, 2).setText("99")
    dialog.add_row()
    dialog.table.item(dialog.table.rowCount() - 1, 0).setText("temp-model")
    for row in (row_of(dialog, "gpt-4o"), row_of(dialog, "temp-model")):
        dialog.table.selectRow(row)
        dialog.remove_selected()
    assert dialog.table.item(row_of(dialog, "gpt-4o"), 2).text() == "10.00"
    assert dialog.table.item(row_of(dialog, "gpt-4o"), 4).text() == SHIPPED
    assert not any(dialog.table.item(r, 0).text() == "temp-model"
                   for r in range(dialog.table.rowCount()))


@pytest.mark.parametrize("field, text, says", [
    (1, "cheap", "input must be a number"),
    (2, "", "output is empty"),
    (1, "-1", "outside 0 to 10000"),
    (3, "20000", "cached 20000 is outside"),
])
def test_wrong_input_is_named_and_nothing_is_written(dialog, field, text, says):
    r = row_of(dialog, "gpt-4o-mini")
    dialog.table.item(r, field).setText(text)
    assert not dialog.save()
    assert says in dialog.problem.text() and "gpt-4o-mini" in dialog.problem.text()
    assert not cost.user_prices_path().exists()


def test_an_added_row_needs_a_name_and_no_twin(dialog):
    dialog.add_row()
    new = dialog.table.rowCount() - 1
    dialog.table.item(new, 1).setText("1")
    dialog.table.item(new, 2).setText("2")
    assert not dialog.save()
    assert "needs a name" in dialog.problem.text()
    dialog.table.item(new, 0).setText("gpt-4o")  # a shipped model's name again
    assert not dialog.save() and "listed twice" in dialog.problem.text()
