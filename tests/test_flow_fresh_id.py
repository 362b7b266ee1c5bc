"""runtime.flow.model.fresh_id: the one way a node id is made free, for the
designer's copies and pastes (designer.model.commands) and for the nodes
subflow edits bring in (runtime.flow.subflow_edit)."""

from runtime.flow.model import fresh_id


def test_a_free_id_is_kept():
    assert fresh_id("ask", {"send"}) == "ask"


def test_a_taken_id_counts_on_from_two_or_from_the_number_it_ends_in():
    assert fresh_id("ask", {"ask"}) == "ask2"
    assert fresh_id("ask", {"ask", "ask2", "ask3"}) == "ask4"
    assert fresh_id("ask2", {"ask2"}) == "ask3"


def test_an_id_of_digits_only_keeps_them_as_its_stem():
    assert fresh_id("42", {"42"}) == "422"
