"""Datasets the hub cannot serve: one clear error that names the dataset and the offline route.

These run with huggingface_hub's and datasets' real offline mode switched on (no mock): the
machines that run the tests cannot reach the hub anyway, this only makes the failure immediate.
"""

from __future__ import annotations

import pytest

from mteb_fairpos.hub import HubUnavailableError, hub_access


@pytest.fixture
def offline(monkeypatch):
    import datasets.config
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.delenv("MTEB_FAIRPOS_DATA_DIR", raising=False)


def test_retrieval_task_without_hub_or_local_copy(offline):
    from mteb_fairpos.tasks.posq import SQuADPosQ

    with pytest.raises(HubUnavailableError, match=r"dataset rajpurkar/squad_v2 .*\$MTEB_FAIRPOS_DATA_DIR/rajpurkar/squad_v2"):
        SQuADPosQ().load_data()


def test_posir_without_hub_or_local_copy(offline):
    from mteb_fairpos.tasks.posir import PosIR

    with pytest.raises(HubUnavailableError, match=r"folder list of infgrad/PosIR-Benchmark-v1/deu-Latn.*data_dir="):
        PosIR(languages=["deu"], domains=["game"]).load_data()


def test_permutation_corpus_without_hub(offline):
    from mteb_fairpos.permutation.corpus import load_hf_corpus

    with pytest.raises(HubUnavailableError, match="pass a local corpus file"):
        load_hf_corpus()


def test_only_hub_failures_are_translated():
    with pytest.raises(ValueError, match="not a hub problem"), hub_access("x", "hint"):
        raise ValueError("not a hub problem")
    with pytest.raises(HubUnavailableError, match=r"Could not read x from the Hugging Face hub \(ConnectionError: down\)\. hint") as info:
        with hub_access("x", "hint"):
            raise ConnectionError("down")
    assert isinstance(info.value.__cause__, ConnectionError)  # the original stays attached
