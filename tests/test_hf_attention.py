"""`wavemla.hf_attention`: transformers' DeepSeek-V4 model through wavemla's sparse prefill and decode.

A tiny random DeepSeek-V4 (sliding, CSA and HCA layers, head_dim 512, per-head sinks) generates with
``attn_implementation="wavemla"``; every prefill and decode-step attention call is checked against transformers'
own eager attention computed in fp64 on the same inputs (FlashMLA's tolerances; on the GPU with bf16 rows, the
bound of bf16 softmax weights), and the generation against the eager model (in fp16).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from tests.conftest import DEVICE
from wavemla import hf_attention
from wavemla.testing import Tolerance, assert_close, rows_out_tolerance

transformers = pytest.importorskip("transformers")
if not hasattr(transformers, "DeepseekV4ForCausalLM"):
    pytest.skip("this transformers has no DeepSeek-V4 model", allow_module_level=True)

DTYPE = torch.bfloat16 if DEVICE == "cuda" else torch.float16
LANE = "gpu" if DEVICE == "cuda" else "interp"
LAYERS = ("sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention")


def tiny_model(seed: int = 0, dtype: torch.dtype = DTYPE, **overrides: Any) -> Any:
    """DeepSeek-V4's attention at its real head_dim (512, rope 64, one shared key=value head, sinks) and its
    indexer's (128), everything else tiny; CSA compresses 4 tokens, HCA 8 (128 in the model), so a 21-token prompt
    has compressed rows of both. ``overrides``: other config values."""
    cfg = transformers.DeepseekV4Config(**{
        "vocab_size": 97, "hidden_size": 64, "moe_intermediate_size": 32, "num_hidden_layers": 3,
        "num_attention_heads": 4, "head_dim": 512, "q_lora_rank": 32, "n_routed_experts": 4, "num_experts_per_tok": 2,
        "o_groups": 2, "o_lora_rank": 16, "index_n_heads": 16, "index_head_dim": 128, "index_topk": 3,
        "sliding_window": 8, "layer_types": list(LAYERS), "mlp_layer_types": ["moe"] * 3, "hc_mult": 2,
        "hc_sinkhorn_iters": 3, "num_nextn_predict_layers": 0, "pad_token_id": 0,
        "compress_rates": {"compressed_sparse_attention": 4, "heavily_compressed_attention": 8}, **overrides,
    })  # fmt: skip
    torch.manual_seed(seed)
    model = transformers.DeepseekV4ForCausalLM(cfg).eval()
    for name, p in model.named_parameters():
        if name.endswith("sinks"):
            p.data.normal_(0.0, 2.0)  # initialized to 0; make them matter
    return model.to(device=DEVICE, dtype=dtype)


def out_tolerance(rows: torch.Tensor) -> Tolerance:
    """FlashMLA's output tolerance; on the GPU with bf16 rows widened by the rounding of the softmax weights to bf16
    for the PV product (:func:`wavemla.testing.rows_out_tolerance`): a row list as short as these (11 to 30 rows)
    does not average that rounding away, and outputs of nearly cancelling rows miss the abs 1e-3."""
    return rows_out_tolerance(LANE, (rows,) if rows.dtype == torch.bfloat16 else ())


def _prompt() -> tuple[torch.Tensor, torch.Tensor]:
    """Two prompts of 21 and 5 tokens, the second left-padded into the sliding window: masked rows in every layer."""
    gen = torch.Generator().manual_seed(7)
    ids = torch.randint(2, 97, (2, 21), generator=gen)
    mask = torch.ones_like(ids)
    ids[1, :16], mask[1, :16] = 0, 0
    return ids.to(DEVICE), mask.to(DEVICE)


@pytest.fixture
def registered() -> Iterator[list[dict[str, Any]]]:
    """``attn_implementation="wavemla"``, with every call's inputs and output recorded."""
    calls: list[dict[str, Any]] = []

    def spy(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
        out = hf_attention._attention(module, query, key, value, attention_mask, scaling, dropout, **kwargs)
        calls.append({"module": module, "query": query, "key": key, "mask": attention_mask, "scaling": scaling,
                      "sinks": kwargs.get("s_aux"), "out": out[0]})  # fmt: skip
        return out

    assert hf_attention.register() == "wavemla"
    transformers.AttentionInterface.register("wavemla", spy)
    yield calls
    hf_attention.register()


def _generate(model: Any, implementation: str) -> Any:
    ids, mask = _prompt()
    model.config._attn_implementation = implementation
    with torch.no_grad():
        return model.generate(ids, attention_mask=mask, max_new_tokens=4, min_new_tokens=4, do_sample=False,
                              output_logits=True, return_dict_in_generate=True)  # fmt: skip


def _eager_fp64(call: dict[str, Any]) -> torch.Tensor:
    """transformers' eager attention of a recorded call's module, in fp64 on the call's inputs."""
    module = call["module"]
    eager = importlib.import_module(type(module).__module__).eager_attention_forward
    with torch.no_grad():
        ref, _ = eager(module, call["query"].double(), call["key"].double(), call["key"].double(),
                       call["mask"].double(), scaling=call["scaling"], s_aux=call["sinks"])  # fmt: skip
    return ref


def test_decode_calls_match_eager_attention_in_fp64(registered: list[dict[str, Any]]) -> None:
    model = tiny_model()
    _generate(model, "wavemla")
    decode = [c for c in registered if c["query"].shape[2] == 1]
    assert len(decode) == 3 * 3  # 3 layers x 3 decode steps (the first token comes from the prefill)
    masked: dict[str, bool] = dict.fromkeys(LAYERS, False)
    past_window: dict[str, bool] = dict.fromkeys(LAYERS, False)
    for c in decode:
        module = c["module"]
        ref = _eager_fp64(c)
        assert_close(f"{module.layer_type} out", c["out"].double(), ref, out_tolerance(c["key"]))
        masked[module.layer_type] |= bool((c["mask"] < 0).any())
        past_window[module.layer_type] |= c["key"].shape[2] > model.config.sliding_window
    # every layer type had masked rows (index lists with -1); CSA and HCA attended compressed rows too
    assert masked == dict.fromkeys(LAYERS, True)
    assert past_window == {"sliding_attention": False, "compressed_sparse_attention": True,
                           "heavily_compressed_attention": True}  # fmt: skip


def test_generation_matches_the_eager_model(registered: list[dict[str, Any]]) -> None:
    """fp16 on both lanes: fp16 rows keep the softmax weights 8x more precise than bf16, so the logits of the two
    implementations stay within 4e-3 (bf16's precision is the decode-call test's, against fp64)."""
    model = tiny_model(seed=1, dtype=torch.float16)
    eager = _generate(model, "eager")
    ours = _generate(model, "wavemla")
    assert torch.equal(eager.sequences, ours.sequences)
    for step, (a, b) in enumerate(zip(eager.logits, ours.logits, strict=True)):  # step 0: the prefill's
        diff = float((a.float() - b.float()).abs().max())
        assert diff <= 4e-3 * max(1.0, float(a.float().abs().max())), (step, diff)
    assert any(c["query"].shape[2] > 4 for c in registered)  # the prefill went through the registered function


def test_prefill_calls_match_eager_attention_in_fp64(registered: list[dict[str, Any]]) -> None:
    """The prompt's calls (21 query tokens, the second prompt left-padded) run the sparse prefill: every token that
    attends a row gets eager attention's output (fp64); the padding's tokens, which attend none, get zeros, as in
    eager attention."""
    model = tiny_model()
    _generate(model, "wavemla")
    prefill = [c for c in registered if c["query"].shape[2] > 4]
    assert sorted(c["module"].layer_type for c in prefill) == sorted(LAYERS)
    for c in prefill:
        module = c["module"]
        ref = _eager_fp64(c)
        attends = (c["mask"][:, 0] >= 0).any(-1)  # [b, s_q]
        assert bool((~attends).any()) and bool(attends.any())
        assert_close(f"{module.layer_type} out", c["out"][attends].double(), ref[attends], out_tolerance(c["key"]))
        assert bool((c["out"][~attends] == 0).all()) and bool((ref[~attends] == 0).all())  # the sink outweighs


# --- the function alone -----------------------------------------------------------------------------------------
def _layer(model: Any, layer_type: str) -> Any:
    return next(m for m in model.modules() if getattr(m, "layer_type", None) == layer_type and hasattr(m, "sinks"))


def _inputs(b: int = 2, s_q: int = 3, length: int = 11) -> dict[str, Any]:
    gen = torch.Generator().manual_seed(3)
    q = torch.randn(b, 4, s_q, 512, generator=gen).to(DEVICE, DTYPE)
    kv = torch.randn(b, 1, length, 512, generator=gen).to(DEVICE, DTYPE)
    allowed = torch.rand(b, 1, s_q, length, generator=gen) < 0.7
    mask = torch.zeros(b, 1, s_q, length).masked_fill(~allowed, torch.finfo(DTYPE).min).to(DEVICE, DTYPE)
    return {"query": q, "key": kv, "value": kv, "attention_mask": mask, "scaling": 512**-0.5}


def test_speculative_tokens_and_boolean_masks() -> None:
    """s_q 3 (speculative tokens) with a random additive mask, and the same mask as booleans."""
    module = _layer(tiny_model(), "compressed_sparse_attention")
    x = _inputs()
    sinks = module.sinks.detach()
    out, _ = hf_attention._attention(module, **x, s_aux=sinks)
    ref, _ = importlib.import_module(type(module).__module__).eager_attention_forward(
        module, x["query"].double(), x["key"].double(), x["key"].double(), x["attention_mask"].double(),
        scaling=x["scaling"], s_aux=sinks,
    )  # fmt: skip
    assert_close("out", out.double(), ref, out_tolerance(x["key"]))
    as_bool, _ = hf_attention._attention(module, **{**x, "attention_mask": x["attention_mask"] == 0}, s_aux=sinks)
    assert torch.equal(as_bool, out)


def _csa_mask(b: int, s_q: int, length: int, window: int, picks: int, seed: int) -> torch.Tensor:
    """``[b, 1, s_q, L]`` bool: each token attends the last ``window`` rows and ``picks`` random earlier ones."""
    gen = torch.Generator().manual_seed(seed)
    allowed = torch.zeros(b, 1, s_q, length, dtype=torch.bool)
    allowed[..., -window:] = True
    chosen = torch.rand(b, 1, s_q, length - window, generator=gen).argsort(-1)[..., :picks]
    allowed[..., : length - window].scatter_(-1, chosen, True)
    return allowed


def test_long_csa_lists_keep_the_attended_rows_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """A CSA call over 300 gathered rows, of which each token attends its window (8 in the tiny model) and the
    indexer's 3 picks: the lists hold those rows only, in row order, in one 64-entry step (window + index_topk
    rounded up), and the output is eager attention's (fp64). A request that attends no row: the sink takes it all.
    (A float mask is read on the host for its bias check anyway, so the cut needs no CUT_MIN_ENTRIES saved entries.)"""
    module = _layer(tiny_model(), "compressed_sparse_attention")
    x = _inputs(b=3, s_q=2, length=300)
    allowed = _csa_mask(3, 2, 300, module.config.sliding_window, module.config.index_topk, seed=4)
    allowed[2] = False
    x["attention_mask"] = torch.zeros(3, 1, 2, 300).masked_fill(~allowed, torch.finfo(DTYPE).min).to(DEVICE, DTYPE)
    calls = []
    decode = hf_attention.sparse_mla_decode

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[2])
        return decode(*args, **kwargs)

    sinks = module.sinks.detach()
    monkeypatch.setattr(hf_attention, "sparse_mla_decode", spy)
    out, _ = hf_attention._attention(module, **x, s_aux=sinks)
    (indices,) = calls
    valid = allowed[:, 0].to(DEVICE)
    assert indices.shape == (3, 2, hf_attention.LIST_STEP)
    bool_out, _ = hf_attention._attention(module, **{**x, "attention_mask": allowed.to(DEVICE)}, s_aux=sinks)
    assert calls[-1].shape == (3, 2, 300)  # a bool mask: 6 x 236 entries saved, under CUT_MIN_ENTRIES
    for i in range(3):
        for t in range(2):
            rows = torch.nonzero(valid[i, t]).flatten().to(torch.int32) + i * 300
            n = rows.numel()
            assert torch.equal(indices[i, t, :n], rows) and bool((indices[i, t, n:] == -1).all())
    ref, _ = importlib.import_module(type(module).__module__).eager_attention_forward(
        module, x["query"].double(), x["key"].double(), x["key"].double(), x["attention_mask"].double(),
        scaling=x["scaling"], s_aux=sinks,
    )  # fmt: skip
    assert_close("out", out.double(), ref, out_tolerance(x["key"]))
    assert_close("out, bool mask", bool_out.double(), ref, out_tolerance(x["key"]))


def test_csa_token_attending_more_than_its_list_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """More attended rows than a CSA layer's window + index_topk (65 > 64 entries) would be dropped: refused. The
    width: a CSA layer's cut wherever it is under L when the cut is free (a float mask, capture), else where it saves
    CUT_MIN_ENTRIES entries (an eager call with a bool mask); other layers every row."""
    module = _layer(tiny_model(), "compressed_sparse_attention")
    other = _layer(tiny_model(), "heavily_compressed_attention")  # may attend every row
    big = hf_attention.CUT_MIN_ENTRIES
    width = functools.partial(hf_attention._list_width, cut_free=False)  # an eager call with a bool mask
    assert width(module, 1, 300) == 300  # 236 entries saved: not worth the host read the cut adds
    assert width(module, 1, 64 + big) == 64 and width(other, 1, 64 + big) == 64 + big
    assert width(module, 8, 64 + big // 8) == 64 and width(module, 8, 63 + big // 8) > 64
    free = functools.partial(hf_attention._list_width, cut_free=True)  # a float mask, or under capture
    assert free(module, 1, 300) == 64 and free(module, 1, 65) == 64 and free(module, 1, 64) == 64
    assert free(module, 1, 40) == 40 and free(other, 1, 300) == 300
    monkeypatch.setattr(hf_attention, "CUT_MIN_ENTRIES", 0)
    assert width(module, 1, 300) == 64 and width(module, 1, 40) == 40
    x = _inputs(b=1, s_q=1, length=300)
    allowed = _csa_mask(1, 1, 300, 8, 57, seed=5)
    x["attention_mask"] = torch.zeros(1, 1, 1, 300).masked_fill(~allowed, torch.finfo(DTYPE).min).to(DEVICE, DTYPE)
    refusal = r"^attention_mask: a token of this compressed_sparse_attention layer attends 65 rows"
    with pytest.raises(ValueError, match=refusal):
        hf_attention._attention(module, **x, s_aux=module.sinks)


def test_index_lists_every_row_or_cut() -> None:
    """Width L: every row, −1 where masked (no mask: every row). A smaller width: the attended rows first, in row
    order (rows past the width are dropped: the caller checks the count)."""
    device = torch.device(DEVICE)
    lists = hf_attention._index_lists(None, 2, 1, 70, 70, device)
    assert lists.shape == (2, 1, 70) and int(lists[1, 0, 0]) == 70
    valid = torch.zeros(2, 1, 70, dtype=torch.bool, device=device)
    valid[:, :, 5] = True
    valid[1, :, 60:] = True
    lists = hf_attention._index_lists(valid, 2, 1, 70, 70, device)
    assert lists.shape == (2, 1, 70) and lists[:, 0, 5].tolist() == [5, 75]
    assert int((lists >= 0).sum()) == 12
    lists = hf_attention._index_lists(valid, 2, 1, 70, 8, device)
    assert lists.shape == (2, 1, 8) and hf_attention._mask_checks(valid) == 11
    assert lists[0, 0].tolist() == [5] + [-1] * 7 and lists[1, 0].tolist() == [75, *range(130, 137)]


def test_mask_dtype_refused() -> None:
    """A float64 (or integer) mask: refused, naming the argument."""
    module = _layer(tiny_model(), "heavily_compressed_attention")
    x = _inputs(s_q=1)
    for dtype in (torch.float64, torch.int64):
        mask = torch.zeros(x["query"].shape[0], 1, 1, x["key"].shape[2], dtype=dtype, device=DEVICE)
        with pytest.raises(ValueError, match=r"^attention_mask: expected bool, fp16, bf16 or fp32"):
            hf_attention._attention(module, **{**x, "attention_mask": mask}, s_aux=module.sinks)


def test_a_view_of_the_key_is_the_value() -> None:
    """Another tensor object over the same memory passes (no values are compared: nothing is read on the host)."""
    module = _layer(tiny_model(), "heavily_compressed_attention")
    x = _inputs(s_q=1)
    out, _ = hf_attention._attention(module, **x, s_aux=module.sinks)
    viewed, _ = hf_attention._attention(module, **{**x, "value": x["key"].view(x["key"].shape)}, s_aux=module.sinks)
    assert torch.equal(out, viewed)
    with pytest.raises(ValueError, match=r"^value: "):
        hf_attention._attention(module, **{**x, "value": x["key"].clone()}, s_aux=module.sinks)


def test_prefill_lists_hold_the_attended_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """A prefill call (6 query tokens over 300 rows, each attending its window of 8 and 3 picks, one token 80 rows):
    the lists are as wide as the most rows a token attends, rounded up to 64 entries, hold the attended rows in row
    order, and the output is eager attention's (fp64): with the mask read on the host for the width, the cut needs no
    CUT_MIN_ENTRIES saved entries. Every row is listed where a token attends within 64 of them all."""
    module = _layer(tiny_model(), "compressed_sparse_attention")
    x = _inputs(b=2, s_q=6, length=300)
    allowed = _csa_mask(2, 6, 300, module.config.sliding_window, module.config.index_topk, seed=6)
    allowed[1, 0, 4, :70] = True
    x["attention_mask"] = torch.zeros(2, 1, 6, 300).masked_fill(~allowed, torch.finfo(DTYPE).min).to(DEVICE, DTYPE)
    sinks = module.sinks.detach()
    ref, _ = importlib.import_module(type(module).__module__).eager_attention_forward(
        module, x["query"].double(), x["key"].double(), x["key"].double(), x["attention_mask"].double(),
        scaling=x["scaling"], s_aux=sinks,
    )  # fmt: skip
    calls = []
    prefill = hf_attention.sparse_mla_prefill

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[2])
        return prefill(*args, **kwargs)

    monkeypatch.setattr(hf_attention, "sparse_mla_prefill", spy)
    out, weights = hf_attention._attention(module, **x, s_aux=sinks)
    assert weights is None and calls[-1].shape == (12, 1, 128)  # 80 rows at most (token 4 of request 1)
    valid = allowed[:, 0].to(DEVICE).reshape(12, 300)
    for t in range(12):
        rows = torch.nonzero(valid[t]).flatten().to(torch.int32) + (t // 6) * 300
        n = rows.numel()
        assert torch.equal(calls[-1][t, 0, :n], rows) and bool((calls[-1][t, 0, n:] == -1).all())
    assert_close("out", out.double(), ref, out_tolerance(x["key"]))
    wide = allowed.clone()
    wide[0, 0, 1, 10:] = True  # 290 rows: the width rounds up past L
    x["attention_mask"] = torch.zeros(2, 1, 6, 300).masked_fill(~wide, torch.finfo(DTYPE).min).to(DEVICE, DTYPE)
    full, _ = hf_attention._attention(module, **x, s_aux=sinks)
    assert calls[-1].shape == (12, 1, 300)
    ref_full, _ = importlib.import_module(type(module).__module__).eager_attention_forward(
        module, x["query"].double(), x["key"].double(), x["key"].double(), x["attention_mask"].double(),
        scaling=x["scaling"], s_aux=sinks,
    )  # fmt: skip
    assert_close("out, every row listed", full.double(), ref_full, out_tolerance(x["key"]))


def test_prefill_refusals_name_the_argument() -> None:
    module = _layer(tiny_model(), "sliding_attention")
    x = _inputs(s_q=5, length=5)
    with pytest.raises(ValueError, match=r"^query: "):
        hf_attention._attention(module, **{**x, "query": x["query"].float()}, s_aux=module.sinks)
    x["attention_mask"] = x["attention_mask"].clone()
    x["attention_mask"][1, 0, 4, 2] = -1.0
    with pytest.raises(ValueError, match=r"^attention_mask: holds biases"):
        hf_attention._attention(module, **x, s_aux=module.sinks)


@pytest.mark.parametrize(
    ("change", "name"),
    [
        ({"query": "fp32"}, "query"),
        ({"query": "head_dim"}, "query"),
        ({"value": "other"}, "value"),
        ({"key": "two_heads"}, "key"),
        ({"attention_mask": "bias"}, "attention_mask"),
        ({"attention_mask": "per_head"}, "attention_mask"),
        ({"attention_mask": "short"}, "attention_mask"),
        ({"dropout": 0.1}, "dropout"),
    ],
    ids=lambda v: v if isinstance(v, str) else "-".join(f"{k}={w}" for k, w in v.items()),
)
def test_refusals_name_the_argument(change: dict[str, Any], name: str) -> None:
    module = _layer(tiny_model(), "sliding_attention")
    x = _inputs(s_q=1)
    kwargs: dict[str, Any] = {}
    for key, how in change.items():
        if how == "fp32":
            x["query"] = x["query"].float()
        elif how == "head_dim":
            x["query"] = x["query"][..., :256]
        elif how == "other":
            x["value"] = x["key"].clone() + 1
        elif how == "two_heads":
            x["key"] = x["value"] = x["key"].expand(-1, 2, -1, -1)
        elif how == "bias":
            x["attention_mask"] = x["attention_mask"].clone()
            x["attention_mask"][0, 0, 0, 0] = -1.0
        elif how == "per_head":
            x["attention_mask"] = x["attention_mask"].expand(-1, 4, -1, -1)
        elif how == "short":
            x["attention_mask"] = x["attention_mask"][..., :-1]
        else:
            kwargs[key] = how
    with pytest.raises(ValueError, match=f"^{name}: "):
        hf_attention._attention(module, **x, **kwargs, s_aux=module.sinks)


def test_backward_is_refused() -> None:
    """The kernels compute no gradients: a backward pass through a training step, or through one decode call, raises
    naming the inputs, rather than leaving the attention's projections and sinks without gradients. A forward pass
    outside ``torch.no_grad`` runs as before."""
    model = tiny_model(dtype=torch.float16)
    model.config._attn_implementation = hf_attention.register()
    ids, mask = _prompt()
    with torch.no_grad():
        ref = model(ids, attention_mask=mask).logits
    assert torch.equal(model(ids, attention_mask=mask).logits, ref)
    refusal = r"^q, (kv(_cache)?, )?attn_sink: wavemla's attention kernels compute no gradients"
    model.train()
    loss = model(ids, attention_mask=mask, labels=ids).loss
    with pytest.raises(RuntimeError, match=refusal):
        loss.backward()
    module = _layer(model, "heavily_compressed_attention")
    x = _inputs(s_q=1)
    out, _ = hf_attention._attention(module, **{**x, "query": x["query"].requires_grad_()}, s_aux=module.sinks)
    with pytest.raises(RuntimeError, match=refusal):
        out.float().sum().backward()


def test_register_names_the_argument() -> None:
    with pytest.raises(ValueError, match=r"^name: "):
        hf_attention.register("")
