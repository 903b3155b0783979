"""The fast calibrated backend against the independent nnsight reference (docs/method.md#s1-5).

Tiny randomly initialised models of every supported architecture (hidden 32, 4 layers), saved
with the offline MiniLM tokenizer and wrapped as sentence-transformers models. The fast path
(``FairSentenceTransformer.encode_document``) and the reference (eager attention whose softmax
output nnsight edits with the same row math) must agree to 1e-5 in fp32 over batches of unequal
lengths, left and right padding, cls/last/mean pooling, several basket sizes, layer sets and
strengths. The tests taking ``device`` run on every device present (the CPU, and CUDA where
``torch.cuda.is_available()``), the same files on a GPU machine as in CI.
"""

from __future__ import annotations

import os
import warnings

import pytest
import torch
from torch import nn

from mteb_fairpos import CalibrationConfig, FairSentenceTransformer, UnsupportedModelError, attach
from mteb_fairpos.reference import reference_embeddings

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
"""Where the device-parametrised tests run."""
ST_POOLING = {"cls": "cls", "last": "lasttoken", "mean": "mean"}
TOLERANCE = 1e-5
WORDS = ("the museum reopened its east wing with a new collection of maritime maps and ship models while heavy "
         "rain flooded several streets downtown and the chess club celebrated its fiftieth anniversary").split()
# Unequal lengths: some shorter than a basket (left uncalibrated), some several baskets long.
TEXTS = [" ".join(WORDS[(3 * i) % len(WORDS):] + WORDS)[: 12 * n] for i, n in enumerate((1, 4, 9, 2, 15, 6, 20))]
CONFIGS = [
    CalibrationConfig(basket_size=4, layers="last_half", strength=1.0),
    CalibrationConfig(basket_size=8, layers="last", strength=0.5),
    CalibrationConfig(basket_size=16, layers=(0,), strength=1.0),
    CalibrationConfig(basket_size=4, layers=1.0, strength=0.5),
    CalibrationConfig(basket_size=8, layers="last_half", strength=1.0, bos_share="equal", eos_share=0.2, isolate_eos=True),
]


def tiny_configs():
    from transformers import BertConfig, GteConfig, JinaEmbeddingsV3Config, Qwen3Config, XLMRobertaConfig

    common = dict(vocab_size=30522, hidden_size=32, num_hidden_layers=4, num_attention_heads=4, intermediate_size=64,
                  max_position_embeddings=256, initializer_range=0.3, pad_token_id=0)
    return {
        "bert": BertConfig(**common),
        "xlm_roberta": XLMRobertaConfig(**common),
        "gte": GteConfig(**common),
        "qwen3": Qwen3Config(**common, num_key_value_heads=2, head_dim=8),  # grouped-query attention
        "jina_embeddings_v3": JinaEmbeddingsV3Config(**common),
    }


def build_transformer(config, tmp_path_factory, tokenizer_dir):
    """A sentence-transformers Transformer module over a freshly initialised, saved tiny model."""
    from sentence_transformers.sentence_transformer.modules import Transformer
    from transformers import AutoModel, AutoTokenizer

    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp(config.model_type)
    AutoModel.from_config(config).save_pretrained(folder)
    AutoTokenizer.from_pretrained(tokenizer_dir).save_pretrained(folder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Transformer(str(folder))


@pytest.fixture(params=DEVICES)
def device(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def tokenizer_dir(request) -> str:
    """The MiniLM tokenizer the tiny models are saved with: the folder in ``FAIRPOS_TOKENIZER_DIR`` where
    set (a GPU machine gets the tokenizer files alone from ``benchmarks/gpu/prepare.sh``), else the
    offline MiniLM package's."""
    return os.environ.get("FAIRPOS_TOKENIZER_DIR") or request.getfixturevalue("minilm_dir")


@pytest.fixture(scope="module")
def transformers_modules(tmp_path_factory, tokenizer_dir):
    from transformers.utils import logging

    logging.set_verbosity_error()
    return {name: build_transformer(cfg, tmp_path_factory, tokenizer_dir) for name, cfg in tiny_configs().items()}


def st_model(transformer, pooling: str, padding: str, device: str = "cpu"):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    transformer.tokenizer.padding_side = padding
    return SentenceTransformer(modules=[transformer, Pooling(transformer.get_embedding_dimension(), ST_POOLING[pooling])],
                               device=device)


ARCHITECTURES = ["bert", "xlm_roberta", "gte", "qwen3", "jina_embeddings_v3"]


@pytest.mark.parametrize("padding", ["right", "left"])
@pytest.mark.parametrize("pooling", ["cls", "last", "mean"])
@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_fast_path_matches_reference(transformers_modules, architecture, pooling, padding, device):
    plain_model = st_model(transformers_modules[architecture], pooling, padding, device)
    plain = plain_model.encode_document(TEXTS, convert_to_tensor=True, batch_size=3).cpu()
    changed = 0.0
    for config in CONFIGS:
        fair = FairSentenceTransformer(plain_model, config)
        fast = fair.encode_document(TEXTS, convert_to_tensor=True, batch_size=3).cpu()  # length-sorted batches of 3
        reference = reference_embeddings(fair, TEXTS, config, batch_size=3)  # the same batches
        assert fast.shape == reference.shape == (len(TEXTS), 32)
        error = (fast - reference).abs().max().item()
        assert error <= TOLERANCE, f"{architecture}/{pooling}/{padding} {config}: max |fast - reference| = {error:.2e}"
        changed = max(changed, (fast - plain).abs().max().item())
    if not (architecture == "qwen3" and pooling == "cls"):  # causal: the first token sees only itself
        assert changed > 1e-3, "calibration changed nothing: the comparison would be vacuous"


@pytest.mark.parametrize("pooling", ["cls", "last", "mean"])
@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_unpadded_single_text_batches(transformers_modules, architecture, pooling, device):
    """Batches of one text: transformers may pass no mask at all (or only `is_causal`) to the backend."""
    model = st_model(transformers_modules[architecture], pooling, "right", device)
    config = CalibrationConfig(basket_size=4, layers="last_half", strength=1.0)
    fair = FairSentenceTransformer(model, config)
    texts = TEXTS[4:5] + TEXTS[6:]
    fast = fair.encode_document(texts, convert_to_tensor=True, batch_size=1).cpu()
    reference = reference_embeddings(fair, texts, config, batch_size=1)
    assert (fast - reference).abs().max().item() <= TOLERANCE


@pytest.mark.parametrize(("architecture", "padding"), [("xlm_roberta", "right"), ("qwen3", "left")])
def test_mean_pooling_in_query_tiles(transformers_modules, monkeypatch, architecture, padding, device):
    """Mean pooling computes every row tile by tile; tiny tiles must give the same result."""
    import mteb_fairpos.attention as fast_backend
    import mteb_fairpos.reference as reference_module

    model = st_model(transformers_modules[architecture], "mean", padding, device)
    config = CalibrationConfig(basket_size=4, layers="last_half", strength=1.0)
    fair = FairSentenceTransformer(model, config)
    whole = fair.encode_document(TEXTS, convert_to_tensor=True, batch_size=3).cpu()  # the fused group path
    monkeypatch.setattr(fast_backend, "TILE_ELEMENTS", 3 * 4 * 40 * 5)  # a few query rows per tile
    monkeypatch.setattr(reference_module, "ROW_TILE_ELEMENTS", 3 * 4 * 40 * 3)
    with fast_backend.mean_kernel("tiled"):  # the fallback path, forced
        tiled = fair.encode_document(TEXTS, convert_to_tensor=True, batch_size=3).cpu()
    reference = reference_embeddings(fair, TEXTS, config, batch_size=3)
    assert (tiled - whole).abs().max().item() <= TOLERANCE
    assert (tiled - reference).abs().max().item() <= TOLERANCE


def test_document_prompt_is_applied_like_encode_document(transformers_modules):
    """encode_document prepends the model's "document" prompt; the reference must embed the same text."""
    from sentence_transformers import SentenceTransformer

    base = st_model(transformers_modules["gte"], "cls", "right")
    model = SentenceTransformer(modules=list(base), device="cpu", prompts={"document": "passage: the chess club "})
    config = CalibrationConfig(basket_size=4, layers="last_half", strength=1.0)
    fair = FairSentenceTransformer(model, config)
    fast = fair.encode_document(TEXTS, convert_to_tensor=True, batch_size=3)
    reference = reference_embeddings(fair, TEXTS, config, batch_size=3)
    assert (fast - reference).abs().max().item() <= TOLERANCE
    unprompted = reference_embeddings(fair, TEXTS, config, batch_size=3, prompt="")
    assert (unprompted - reference).abs().max().item() > 1e-3


def test_strength_zero_and_plain_reference_are_the_plain_model(transformers_modules):
    model = st_model(transformers_modules["qwen3"], "last", "left")
    plain = model.encode_document(TEXTS, convert_to_tensor=True)
    zero = reference_embeddings(model, TEXTS, CalibrationConfig(basket_size=4, strength=0.0))
    unedited = reference_embeddings(model, TEXTS, None)
    assert (zero - plain).abs().max().item() <= TOLERANCE
    assert (unedited - plain).abs().max().item() <= TOLERANCE


def test_reference_leaves_the_model_as_it_was(transformers_modules):
    from nnsight.intervention.source import STATE

    model = st_model(transformers_modules["bert"], "cls", "right")
    config = CONFIGS[0]
    fair = FairSentenceTransformer(model, config)
    before = fair.encode_document(TEXTS, convert_to_tensor=True)
    reference_embeddings(fair, TEXTS, config)
    inner = fair.transformers_model
    # wrapping leaves the model's own implementation in place (calibrated passes switch and restore)
    assert inner.config._attn_implementation == "sdpa"
    assert not any(STATE in m.__dict__ or "forward" in m.__dict__ for m in inner.modules())
    assert not inner.training
    assert torch.equal(fair.encode_document(TEXTS, convert_to_tensor=True), before)


@pytest.mark.parametrize(("architecture", "pooling", "padding"), [("gte", "cls", "right"), ("qwen3", "last", "left"),
                                                                   ("xlm_roberta", "mean", "left")])
def test_reference_on_a_transformers_model_with_a_tokenized_batch(transformers_modules, architecture, pooling, padding):
    """The HF-model route: tokenized batch in, pooled (unnormalised) final hidden states out."""
    transformer = transformers_modules[architecture]
    transformer.tokenizer.padding_side = padding
    inner = transformer.model
    batch = dict(transformer.tokenizer(TEXTS, padding=True, return_tensors="pt"))
    batch.pop("token_type_ids", None)
    config = CalibrationConfig(basket_size=4, layers="last_half", strength=1.0)
    plan = attach(inner, config, pooling)
    with torch.no_grad(), plan.applied(batch["attention_mask"]):
        hidden = inner(**batch).last_hidden_state
    reference = reference_embeddings(inner, batch, config, pooling)
    assert (_pooled(hidden, batch["attention_mask"], pooling) - reference).abs().max().item() <= TOLERANCE


def _pooled(hidden: torch.Tensor, attention_mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """The sequences' embeddings as ``pooling`` takes them from the final hidden states (unnormalised)."""
    mask = attention_mask.bool()
    rows = torch.arange(mask.shape[0])
    if pooling == "cls":
        return hidden[rows, mask.int().argmax(1)]
    if pooling == "last":
        return hidden[rows, mask.shape[1] - 1 - mask.flip(1).int().argmax(1)]
    return (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)


def test_an_attention_forward_under_a_decorator_is_still_found(transformers_modules, monkeypatch):
    """transformers wraps some attention forwards (``deprecate_kwarg``, from 5.24 on); the reference finds
    the attention modules under the wrapper and still reproduces the fast path."""
    import functools

    from transformers.models.bert.modeling_bert import BertSelfAttention

    forward = BertSelfAttention.forward

    @functools.wraps(forward)
    def decorated(self, *args, **kwargs):
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(BertSelfAttention, "forward", decorated)
    model = st_model(transformers_modules["bert"], "mean", "right")
    config = CalibrationConfig(basket_size=4, strength=1.0)
    fast = FairSentenceTransformer(model, config).encode_document(TEXTS, convert_to_tensor=True)
    reference = reference_embeddings(model, TEXTS, config)
    assert (fast - reference).abs().max().item() <= TOLERANCE


# ------------------------------------------------------------------ unsupported models
def test_architecture_without_attention_interface_is_refused(tmp_path_factory, tokenizer_dir):
    from transformers import MPNetConfig

    config = MPNetConfig(vocab_size=30527, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=64, max_position_embeddings=256)
    model = st_model(build_transformer(config, tmp_path_factory, tokenizer_dir), "mean", "right")
    with pytest.raises(UnsupportedModelError, match="MPNetModel"):
        FairSentenceTransformer(model, CalibrationConfig(basket_size=4))
    with pytest.raises(UnsupportedModelError, match="MPNetModel"):
        reference_embeddings(model, TEXTS, CalibrationConfig(basket_size=4))


class TinyCustomEncoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attention = nn.MultiheadAttention(8, 2, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.attention(x, x, x)[0]


def test_plain_torch_module_is_refused():
    with pytest.raises(UnsupportedModelError, match="TinyCustomEncoder"):
        attach(TinyCustomEncoder(), CalibrationConfig(), "mean")


def test_model_claiming_the_interface_but_bypassing_it_is_caught():
    """A class that sets `_supports_attention_backend` yet computes attention itself (as remote code may)."""
    from transformers import BertConfig, PreTrainedModel
    from transformers.modeling_layers import GradientCheckpointingLayer

    class ManualLayer(GradientCheckpointingLayer):
        def __init__(self, size: int) -> None:
            super().__init__()
            self.qkv = nn.Linear(size, 3 * size)

        def forward(self, hidden: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
            q, k, v = self.qkv(hidden).chunk(3, dim=-1)
            weights = torch.softmax(q @ k.transpose(1, 2) / q.shape[-1] ** 0.5 + bias, dim=-1)
            return hidden + weights @ v

    class ManualAttentionModel(PreTrainedModel):
        config_class = BertConfig
        _supports_attention_backend = True
        _supports_sdpa = True

        def __init__(self, config) -> None:
            super().__init__(config)
            self.embed = nn.Embedding(config.vocab_size, config.hidden_size)
            self.layers = nn.ModuleList(ManualLayer(config.hidden_size) for _ in range(config.num_hidden_layers))
            self.post_init()

        def forward(self, input_ids, attention_mask):
            hidden = self.embed(input_ids)
            bias = (1.0 - attention_mask[:, None, :].float()) * -1e9
            for layer in self.layers:
                hidden = layer(hidden, bias)
            return hidden

    model = ManualAttentionModel(BertConfig(vocab_size=50, hidden_size=8, num_hidden_layers=2, num_attention_heads=2))
    plan = attach(model, CalibrationConfig(basket_size=2), "mean")
    ids = torch.randint(1, 50, (2, 9))
    mask = torch.ones_like(ids)
    with pytest.raises(UnsupportedModelError, match="ManualAttentionModel"):
        with torch.no_grad(), plan.applied(mask):
            model(ids, mask)
    with pytest.raises(UnsupportedModelError, match="ManualAttentionModel"):
        reference_embeddings(model, {"input_ids": ids, "attention_mask": mask}, CalibrationConfig(basket_size=2), "mean")


@pytest.mark.parametrize("argument", ["softcap", "position_bias", "s_aux"])
def test_softmax_changing_arguments_are_refused_not_ignored(argument):
    """Calibrated rows compute their own softmax: an argument that changes it is refused, as
    transformers' SDPA function refuses what it cannot honour."""
    from transformers import AutoModel, Gemma2Config

    torch.manual_seed(0)
    config = Gemma2Config(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                          num_key_value_heads=2, head_dim=8, intermediate_size=64, attn_logit_softcapping=50.0)
    model = AutoModel.from_config(config).eval()
    plan = attach(model, CalibrationConfig(basket_size=4, layers=1.0, strength=1.0), "last")
    ids = torch.randint(5, 120, (1, 24))
    mask = torch.ones_like(ids)
    with torch.no_grad():
        if argument == "softcap":  # Gemma 2 itself passes it
            with pytest.raises(UnsupportedModelError, match="Gemma2Model passes `softcap`"), plan.applied(mask):
                model(input_ids=ids, attention_mask=mask)
        else:
            from mteb_fairpos.attention import calibrated_attention

            module = next(m for m, layer in plan.layer_of.items() if layer in plan.layers and hasattr(m, "q_proj"))
            q = k = v = torch.randn(1, 4, 24, 8)
            with pytest.raises(UnsupportedModelError, match=f"`{argument}`"), plan.applied(mask):
                calibrated_attention(module, q, k, v, None, **{argument: torch.zeros(1)})
            with plan.applied(mask):  # the same call without it is calibrated
                assert calibrated_attention(module, q, k, v, None, **{argument: None})[0].shape == (1, 24, 4, 8)



def test_a_softmax_changing_argument_is_refused_in_the_layers_left_plain_too():
    """In a calibrated pass every layer goes through this backend, whose plain layers are SDPA: with the default
    layers (the last half), Gemma 2's soft-capping met transformers' SDPA refusal, advising the eager mode it ran in."""
    from transformers import AutoModel, Gemma2Config

    torch.manual_seed(0)
    config = Gemma2Config(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                          num_key_value_heads=2, head_dim=8, intermediate_size=64, attn_logit_softcapping=50.0)
    model = AutoModel.from_config(config).eval()
    plan = attach(model, CalibrationConfig(basket_size=4), "last")
    assert plan.layers == (1,)
    ids = torch.randint(5, 120, (1, 24))
    mask = torch.ones_like(ids)
    with torch.no_grad(), pytest.raises(UnsupportedModelError, match="Gemma2Model passes `softcap`"), plan.applied(mask):
        model(input_ids=ids, attention_mask=mask)

def test_training_mode_is_refused_not_calibrated_without_its_attention_dropout(transformers_modules):
    """In training mode transformers passes the attention dropout, which the calibrated rows would not apply."""
    fair = FairSentenceTransformer(st_model(transformers_modules["bert"], "mean", "right"),
                                   CalibrationConfig(basket_size=4, layers=1.0, strength=1.0))
    features = fair.preprocess(TEXTS[:2], task="document")
    fair.plan.model.train()
    try:
        with pytest.raises(UnsupportedModelError, match=r"training mode \(attention dropout 0.1\).*model.eval\(\)"):
            fair.forward(dict(features), task="document")
        fair.forward(dict(features), task="query")  # an uncalibrated pass trains as before
    finally:
        fair.plan.model.eval()


def test_batches_packed_for_flash_attention_get_a_clear_error_and_the_fix_works(tmp_path_factory, tokenizer_dir):
    """sentence-transformers packs a batch into one sequence (no attention mask) where the model runs flash attention
    (unpad_inputs). Mocked: flash attention needs CUDA and flash-attn, so the module is put in the state
    sentence-transformers puts it in itself when flash attention is requested. A calibrated pass then says what to do,
    and doing it (padded batches) calibrates as without the packing."""
    from transformers import DataCollatorWithFlattening

    model = st_model(build_transformer(tiny_configs()["bert"], tmp_path_factory, tokenizer_dir), "mean", "right")
    fair = FairSentenceTransformer(model, CalibrationConfig(basket_size=4, layers=1.0, strength=1.0))
    expected = fair.encode_document(TEXTS[:3], convert_to_tensor=True)
    module = fair[0]
    module.data_collator = DataCollatorWithFlattening(return_seq_idx=True, return_flash_attn_kwargs=True,
                                                      return_position_ids=True)
    module.can_flatten_inputs = True
    module._flatten_position_offset = module._infer_flatten_position_offset()
    assert "attention_mask" not in fair.preprocess(TEXTS[:3], task="document")  # packed, as with flash attention
    with pytest.raises(UnsupportedModelError, match=r"packed it into one sequence.*`model\[0\].unpad_inputs = False`"):
        fair.encode_document(TEXTS[:3])
    module.unpad_inputs = False
    assert torch.equal(fair.encode_document(TEXTS[:3], convert_to_tensor=True), expected)


def test_cls_pooling_of_the_first_token_after_a_prompt_is_refused(transformers_modules):
    """A cls Pooling module that leaves the prompt out pools the first token after it, not the first token, whose
    row calibration rewrites: with a prompt that is refused (before, the embedding came out plain, silently)."""
    model = st_model(transformers_modules["gte"], "cls", "right")
    model[1].include_prompt = False
    fair = FairSentenceTransformer(model, CalibrationConfig(basket_size=4, layers="last", strength=1.0))
    with pytest.raises(UnsupportedModelError, match="pools the first token after the prompt"):
        fair.encode_document(TEXTS[1:3], prompt="passage: ")
    without = fair.encode_document(TEXTS[1:3], convert_to_tensor=True)  # no prompt: the first token is pooled
    with fair.calibration_disabled():
        assert (without - fair.encode_document(TEXTS[1:3], convert_to_tensor=True)).abs().max() > 1e-3
    model[1].include_prompt = True  # the prompt is pooled with the rest: the first token again
    fair.encode_document(TEXTS[1:3], prompt="passage: ")


def test_a_model_with_several_encoders_is_refused(transformers_modules):
    """A Router with its own query and document encoders holds two transformers models: calibration attaches to one
    and cannot tell which one encodes the documents (before, it took the query encoder's and blamed remote code)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Router
    from sentence_transformers.sentence_transformer.modules import Pooling

    router = Router.for_query_document(query_modules=[transformers_modules["bert"]],
                                       document_modules=[transformers_modules["gte"]])
    model = SentenceTransformer(modules=[router, Pooling(32, "mean")], device="cpu")
    with pytest.raises(UnsupportedModelError, match="holds 2 transformers models"):
        FairSentenceTransformer(model, CalibrationConfig(basket_size=4))


@pytest.mark.parametrize(("architecture", "pooling", "padding"), [("bert", "cls", "right"), ("bert", "cls", "left"),
                                                                  ("qwen3", "mean", "left")])
def test_a_row_that_sees_no_key_comes_out_as_sdpa_gives_it(transformers_modules, architecture, pooling, padding):
    """A row the model's mask hides every key from (an empty text without special tokens; a causal model's left
    padding) is 0 under SDPA. The PyTorch path's pooling row and the tiled path's rows give it so too (a softmax
    over the mask's bias alone was uniform: an uncalibrated document 2.3 away from the plain model's)."""
    from mteb_fairpos.attention import mean_kernel

    fair = FairSentenceTransformer(st_model(transformers_modules[architecture], pooling, padding),
                                   CalibrationConfig(basket_size=3, layers=1.0, strength=0.8))
    texts = ["", TEXTS[2]] if pooling == "cls" else TEXTS[1:3]
    options = dict(convert_to_tensor=True, processing_kwargs={"text": {"add_special_tokens": False}}) if pooling == "cls" \
        else dict(output_value="token_embeddings")
    with fair.calibration_disabled():
        plain = fair.encode_document(texts, **options)
    routes = {"path": fair.encode_document(texts, **options)}
    with mean_kernel("tiled"):
        routes["tiled"] = fair.encode_document(texts, **options)
    for route, got in routes.items():
        if pooling == "cls":  # the empty text is left uncalibrated: the plain model's vector
            assert torch.equal(got[0], plain[0]), route
        else:  # the left padding rows of the shorter text, uncalibrated
            padded = plain[0].shape[0] - len(fair.tokenizer(texts[0], add_special_tokens=True)["input_ids"])
            assert padded > 0 and torch.equal(got[0][:padded], plain[0][:padded]), route


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_a_two_percent_strength_change_is_caught(transformers_modules, pooling):
    """The 1e-5 tolerance is tight enough to see a wrong strength: the comparison is not vacuous."""
    model = st_model(transformers_modules["bert"], pooling, "right")
    config = CalibrationConfig(basket_size=4, layers="last_half", strength=0.5)
    mutated = FairSentenceTransformer(model, config.replace(strength=0.51))
    fast = mutated.encode_document(TEXTS, convert_to_tensor=True, batch_size=3)
    reference = reference_embeddings(FairSentenceTransformer(model, config), TEXTS, config, batch_size=3)
    assert (fast - reference).abs().max().item() > 10 * TOLERANCE


def test_mean_pooling_over_a_mask_with_a_gap_inside_a_sequence_matches_the_reference(transformers_modules):
    """A mask that hides a span inside a text (no tokenizer makes one, but ``plan.applied`` takes any mask): the
    baskets count the valid tokens around the gap, which the grouped path's key windows cannot hold, so such a
    pass takes the tiled path; the fused kernel refuses it (`padding_fits`)."""
    transformer = transformers_modules["bert"]
    inner = transformer.model
    batch = dict(transformer.tokenizer(TEXTS[4:6], padding=True, return_tensors="pt"))
    batch.pop("token_type_ids", None)
    batch["attention_mask"][:, 3:6] = 0
    config = CalibrationConfig(basket_size=4, layers="last_half", strength=1.0)
    plan = attach(inner, config, "mean")
    with torch.no_grad(), plan.applied(batch["attention_mask"]) as layout:
        hidden = inner(**batch).last_hidden_state
    assert layout.on_host()[0].contiguous is False
    fast = _pooled(hidden, batch["attention_mask"], "mean")
    assert (fast - reference_embeddings(inner, batch, config, "mean")).abs().max().item() <= TOLERANCE



@pytest.mark.parametrize(("architecture", "limit"), [("bert", 256), ("xlm_roberta", 255), ("qwen3", None)])
def test_the_position_limit_is_the_longest_input_the_model_embeds(transformers_modules, architecture, limit, monkeypatch):
    """A learned position table holds so many tokens (RoBERTa's less the rows before its first position); rotary
    positions have no table. Checked against the model itself: the limit embeds, one token more fails in torch."""
    from mteb_fairpos.model import position_limit, set_max_length

    model = st_model(transformers_modules[architecture], "mean", "right")
    monkeypatch.setattr(model, "max_seq_length", model.max_seq_length)  # the module is shared: restored after
    assert position_limit(model) == limit
    if limit is None:
        return
    long_text = " ".join(["word"] * (2 * limit))
    set_max_length(model, limit)
    assert model.encode([long_text]).shape[0] == 1
    model.max_seq_length = limit + 1  # what set_max_length refuses
    with pytest.raises((IndexError, RuntimeError)):
        model.encode([long_text])
    with pytest.raises(ValueError, match=f"--max-length {limit + 1}: this model embeds at most {limit} tokens"):
        set_max_length(model, limit + 1)
