"""The lightning indexer against an implementation we did not write: transformers' DeepSeek-V4 indexer.

A tiny random DeepSeek-V4 (its indexer at the real 16..128 heads of 128 dims) runs a padded prompt and decode
steps; hooks take, from every call of its indexer, the rotated queries, the compressed index keys, the head weights,
the positions, the scores and the top-k it picked. The same inputs go through :func:`lightning_indexer` (keys as a
row cache of page 1, visible rows ``(p + 1) // 4`` per token): the scores must agree and the picked sets must be
equal, except between rows whose scores lie within rounding of the k-th score (transformers' ``topk`` breaks ties
by no stated rule; ours takes the lower row).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tests.conftest import DEVICE
from wavemla.kernels.indexer import indexer_scores, lightning_indexer

transformers = pytest.importorskip("transformers")
if not hasattr(transformers, "DeepseekV4ForCausalLM"):
    pytest.skip("this transformers has no DeepSeek-V4 model", allow_module_level=True)

from tests.test_hf_attention import tiny_model  # noqa: E402  (after the skip: it needs the model)

Q_DTYPE = torch.float16 if DEVICE == "cuda" else torch.float32  # the kernel's lanes (fp32: interpreter only)
# Rounding of a score between the two implementations, relative to the largest |score| of the token.
SCORE_RTOL = 2e-3 if DEVICE == "cuda" else 1e-5


def _capture(model: Any, steps: int) -> list[dict[str, Any]]:
    from transformers.models.deepseek_v4 import modeling_deepseek_v4 as hf

    calls: list[dict[str, Any]] = []

    def on_scorer(module: Any, args: tuple[Any, ...], out: torch.Tensor) -> None:
        q, keys, hidden = args
        weights = module.weights_proj(hidden).float() * module.weights_scaling * module.softmax_scale
        calls.append({"q": q.float(), "keys": keys.float(), "weights": weights, "scores": out})

    def on_indexer(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: torch.Tensor) -> None:
        positions = args[2] if len(args) > 2 else kwargs["position_ids"]
        calls[-1].update(positions=positions, picked=out, rate=module.compress_rate, topk=module.index_topk)

    indexer = next(m for m in model.modules() if isinstance(m, hf.DeepseekV4Indexer))
    handles = [
        indexer.scorer.register_forward_hook(on_scorer),
        indexer.register_forward_hook(on_indexer, with_kwargs=True),
    ]
    gen = torch.Generator().manual_seed(11)
    ids = torch.randint(2, 97, (2, 45), generator=gen)
    mask = torch.ones_like(ids)
    ids[1, :9], mask[1, :9] = 0, 0
    try:
        with torch.no_grad():
            model.generate(ids.to(DEVICE), attention_mask=mask.to(DEVICE), max_new_tokens=steps,
                           min_new_tokens=steps, do_sample=False)  # fmt: skip
    finally:
        for h in handles:
            h.remove()
    return calls


def _ours(c: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(scores, picked rows with -1 padding, visible counts) of wavemla's indexer for one captured call."""
    q, keys = c["q"], c["keys"]
    b, s, _, _ = q.shape
    t = keys.shape[1]
    cache = keys.to(Q_DTYPE).reshape(b * t, 1, keys.shape[-1])
    table = (torch.arange(t, device=q.device) + t * torch.arange(b, device=q.device)[:, None]).to(torch.int32)
    n_comp = ((c["positions"] + 1) // c["rate"]).clamp(0, t).to(torch.int32).expand(b, s).contiguous()
    args = (q.to(Q_DTYPE).contiguous(), c["weights"].contiguous(), cache, table, n_comp)
    scores = indexer_scores(*args, max_n_comp=t)
    slots, _ = lightning_indexer(*args, c["topk"], max_n_comp=t)
    rows = torch.where(slots >= 0, slots - (t * torch.arange(b, device=q.device)).view(b, 1, 1), slots)
    return scores, rows, n_comp


def test_indexer_agrees_with_transformers() -> None:
    model = tiny_model(seed=4)
    calls = _capture(model, steps=3)
    assert [c["q"].shape[1] for c in calls] == [45, 1, 1]  # the prefill (and the first token), then a token a step
    checked = nontrivial = 0
    for c in calls:
        scores, rows, n_vis = _ours(c)
        hf_scores = c["scores"].float()
        visible = torch.arange(hf_scores.shape[-1], device=hf_scores.device) < n_vis[..., None]
        scale = hf_scores.abs().amax(dim=-1, keepdim=True).clamp_min(1e-30)
        assert bool((((scores - hf_scores).abs() <= SCORE_RTOL * scale) | ~visible).all()), "scores"
        b, s, _ = rows.shape
        for i in range(b):
            for j in range(s):
                ours = {int(r) for r in rows[i, j] if r >= 0}
                theirs = {int(r) for r in c["picked"][i, j] if r >= 0}
                checked += 1
                if ours == theirs:
                    nontrivial += len(ours) < int(n_vis[i, j])
                    continue
                # only rows tied with the k-th score (within rounding) may differ
                kth = min(hf_scores[i, j, r] for r in ours | theirs)
                for r in ours ^ theirs:
                    assert abs(float(hf_scores[i, j, r] - kth)) <= SCORE_RTOL * float(scale[i, j]), (i, j, r)
    assert checked == 2 * 45 + 2 * 2 and nontrivial > 40  # most tokens chose among more rows than they kept
