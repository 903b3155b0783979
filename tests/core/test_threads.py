"""Threads sharing one FairSentenceTransformer (a server's worker threads): each thread calibrates, disables and
counts its own passes, whatever the others do meanwhile.

Each test overlaps two threads' calls (`_overlapping`): the second starts while the first is mid-pass, and the first
ends while the second is: the interleaving where a switch or a count shared by the threads goes wrong.
"""

from __future__ import annotations

import pickle
import threading
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

from mteb_fairpos import CalibrationConfig, FairSentenceTransformer, TruncationWarning
from mteb_fairpos.model import UncalibratedWarning
from mteb_fairpos.attention import transformer_layers

DOCUMENTS = ["the harbour master logged every ship that crossed the bar during the winter storms of that year",
             "a small museum in the valley keeps the letters of the engineers who built the railway bridge"]


@pytest.fixture
def fair(minilm):
    return FairSentenceTransformer(minilm, CalibrationConfig(basket_size=4, layers=1.0, strength=1.0))


def _overlapping(fair: FairSentenceTransformer, first: Callable[[], Any], second: Callable[[], Any]) -> tuple[Any, Any]:
    """Run ``first`` in a thread of its own and ``second`` here, their passes overlapping both ways: the first starts,
    pauses before the model's second layer, the second starts, and at its own second layer lets the first end before
    it goes on. Both results (an error in the first thread is raised here)."""
    paused, resume, ended = threading.Event(), threading.Event(), threading.Event()
    results: dict[str, Any] = {}

    def hold(module, args) -> None:
        if threading.current_thread() is worker and not paused.is_set():
            paused.set()
            assert resume.wait(60), "the first thread was never resumed"
        elif threading.current_thread() is not worker and not resume.is_set():
            resume.set()
            assert ended.wait(60), "the first thread did not end"

    def run() -> None:
        try:
            results["first"] = first()
        except BaseException as err:  # raised in the calling thread below
            results["error"] = err
        finally:
            paused.set()
            ended.set()

    worker = threading.Thread(target=run)
    handle = transformer_layers(fair.plan.model)[1].register_forward_pre_hook(hold)
    try:
        worker.start()
        assert paused.wait(60), "the first thread's pass never reached the second layer"
        second_result = second()
    finally:
        resume.set()
        worker.join(60)
        handle.remove()
    if "error" in results:
        raise results["error"]
    return results["first"], second_result


def test_a_calibrated_pass_is_not_switched_back_to_plain_by_another_threads_pass_ending(fair):
    """Two threads calibrate at once: the one that ends first leaves the other on the calibrated backend, so both
    vectors are those each would get alone (switched back to plain SDPA mid-pass, the second was off)."""
    alone = [fair.encode_document([text], convert_to_tensor=True) for text in DOCUMENTS]
    with fair.calibration_disabled():
        plain = fair.encode_document(DOCUMENTS[:1], convert_to_tensor=True)
    assert (plain - alone[0]).abs().max() > 1e-3  # calibration changes this document
    first, second = _overlapping(fair, lambda: fair.encode_document(DOCUMENTS[:1], convert_to_tensor=True),
                                  lambda: fair.encode_document(DOCUMENTS[1:], convert_to_tensor=True))
    assert torch.equal(first, alone[0]) and torch.equal(second, alone[1])
    assert fair.plan.model.config._attn_implementation == "sdpa"  # its own again once no pass calibrates


def test_calibration_disabled_in_one_thread_leaves_the_others_calibrating(fair):
    """A thread inside ``calibration_disabled`` gets plain vectors while another thread's documents are calibrated."""
    calibrated = fair.encode_document(DOCUMENTS[1:], convert_to_tensor=True)
    with fair.calibration_disabled():
        plain = fair.encode_document(DOCUMENTS[:1], convert_to_tensor=True)

    def disabled() -> torch.Tensor:
        with fair.calibration_disabled():
            return fair.encode_document(DOCUMENTS[:1], convert_to_tensor=True)

    first, second = _overlapping(fair, disabled, lambda: fair.encode_document(DOCUMENTS[1:], convert_to_tensor=True))
    assert torch.equal(first, plain) and torch.equal(second, calibrated)


def test_each_encode_call_warns_of_its_own_truncated_and_uncalibrated_inputs(fair, monkeypatch):
    """The warnings count per call, not per model: a call that overlaps another's reports only its own inputs (with
    one count per model, the call that ended last reported the other's truncated input too)."""
    monkeypatch.setattr(fair, "max_seq_length", 24)  # restored after: the wrapped model is shared with other tests
    long_text = " ".join(DOCUMENTS)
    with warnings.catch_warnings(record=True) as caught:  # both threads' warnings, in the order they came
        warnings.simplefilter("always")
        _overlapping(fair, lambda: fair.encode_document([long_text, DOCUMENTS[0]]),
                     lambda: fair.encode_document([long_text, "hi", long_text]))
    truncation = sorted(str(w.message).split(" exceeded")[0] for w in caught if issubclass(w.category, TruncationWarning))
    uncalibrated = [str(w.message).split(" were")[0] for w in caught if issubclass(w.category, UncalibratedWarning)]
    assert truncation == ["1 input(s)", "2 input(s)"], truncation
    assert uncalibrated == ["1 of 3 document(s)"], uncalibrated


def test_inside_calibration_disabled_the_model_reads_and_pickles_as_the_plain_one(minilm_dir):
    """Inside the block (in its thread) the model has no plan: it saves, labels and pickles as the plain model, so worker
    processes started there (``encode_document(..., device=[...])`` pickles the model) encode uncalibrated too. (A
    model of its own: the shared one may carry other tests' hooks, which do not pickle.)"""
    from sentence_transformers import SentenceTransformer

    fair = FairSentenceTransformer(SentenceTransformer(minilm_dir, device="cpu"),
                                   CalibrationConfig(basket_size=4, layers=1.0, strength=1.0))
    calibrated = fair.encode_document(DOCUMENTS[:1], convert_to_tensor=True)
    with fair.calibration_disabled():
        assert fair.plan is None and "(calibration): none" in repr(fair)
        plain = fair.encode_document(DOCUMENTS[:1], convert_to_tensor=True)
        copy = pickle.loads(pickle.dumps(fair))
    assert fair.plan is not None and copy.plan is None
    assert torch.equal(copy.encode_document(DOCUMENTS[:1], convert_to_tensor=True), plain)
    assert torch.equal(pickle.loads(pickle.dumps(fair)).encode_document(DOCUMENTS[:1], convert_to_tensor=True), calibrated)
