"""Hugging Face models as users export them, swept through the edge runtime against onnxruntime.

    python -m benchmarks.hf_zoo                        # every model at its real size
    python -m benchmarks.hf_zoo --models resnet50,gpt2 --budget 3
    python -m benchmarks.hf_zoo --quick                # tiny configs: a smoke run, not a measurement
    python -m benchmarks.hf_zoo --no-timing            # conversion and correctness only
    python -m benchmarks.hf_zoo --dynamo               # the dynamo exporter (torch 2.13's default)
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python -m benchmarks.hf_zoo   # against a peer

Each model is a ``transformers`` model class built from its default (or a checkpoint's) config
with seeded random weights (never ``from_pretrained``: nothing is downloaded), wrapped to return its
first output (the last hidden state, or the logits of a model with a head), or for a causal LM as
one generation step with a KV cache (``DecodeStep``: the cache in, the logits and grown cache out),
exported by ``torch.onnx.export`` (the TorchScript exporter at
opset 17, as ``benchmarks.zoo`` exports, or with ``--dynamo`` the dynamo exporter), converted as
``flowstack convert`` converts it (``import_onnx`` + the exporter's passes + the flow writer),
checked against onnxruntime at batch 1 and 2 (the largest difference relative to the output's
largest magnitude, within 1e-4) and timed at batch 1 against onnxruntime with 2 intra-op threads
in alternating blocks (``benchmarks.timing.time_pair``). Exports are cached (``--cache``, default
``$TMPDIR/flowstack_hf_zoo``) under a key of the config, the inputs' shapes, the exporter and the
torch and transformers versions, so a second run only converts and times.

torch and transformers are benchmark peers, never package dependencies: importing this module
needs torch; ``transformers`` is imported when a model is built.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import math
import os
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import onnx
import torch
from torch import nn

from benchmarks.edge_vs_onnxruntime import ANSI_ESCAPE, chosen_models, flow_bytes, machine, ort_session
from benchmarks.timing import PairRatios, Timing, time_pair
from benchmarks.zoo import OPSET, export, trained_looking_parameters
from edge_runtime import load

# |ours - ort| <= 1e-4 * max |ort|: benchmarks.zoo's criterion, but against the output's own scale
# (the zoo's floor of 1 would pass anything on LeViT's last hidden state, whose values are ~1e-3)
TOLERANCE = 1e-4
DEFAULT_CACHE = Path(tempfile.gettempdir()) / "flowstack_hf_zoo"
CHECK_BATCH = 2  # exported with a dynamic batch: checked at batch 1 (timed) and at this one too
DYNAMO_OPSET = 18  # the lowest opset the dynamo exporter translates to directly
SHOWN_INPUTS = 3  # the report's input column: the first inputs' shapes (a KV cache has two per layer)

Inputs = Callable[[bool, int], dict[str, np.ndarray]]

# ------------------------------------------------------------------------------ the model table


@dataclass(frozen=True)
class HfModel:
    """A ``transformers`` model class, its config at full and quick size, and its inputs."""

    name: str
    model_class: str  # an attribute of ``transformers``, or ``Class.attr`` for a part (WhisperModel.encoder)
    config_class: str
    full: dict[str, Any]
    quick: dict[str, Any]
    inputs: Inputs  # (quick, batch) -> feeds
    wrapper: type[nn.Module] | None = None  # FirstOutput unless given (DecodeStep for a generation step)

    def config(self, quick: bool = False) -> Any:
        import transformers

        return getattr(transformers, self.config_class)(**(self.quick if quick else self.full))

    def feeds(self, quick: bool = False, batch: int = 1) -> dict[str, np.ndarray]:
        return self.inputs(quick, batch)

    def build(self, quick: bool = False, seed: int = 0) -> nn.Module:
        """The model with seeded random weights, trained-looking norms, returning its first output."""
        import transformers

        class_name, _, part = self.model_class.partition(".")
        torch.manual_seed(seed)
        model = getattr(transformers, class_name)(self.config(quick))
        model = getattr(model, part) if part else model
        trained_looking_parameters(model, seed)
        return (self.wrapper or FirstOutput)(model.eval(), list(self.feeds(quick)))

    def cache_key(self, quick: bool = False, dynamo: bool = False) -> str:
        import transformers

        shapes = {name: [list(x.shape), str(x.dtype)] for name, x in self.feeds(quick).items()}
        exporter = ["dynamo", DYNAMO_OPSET] if dynamo else ["torchscript", OPSET]
        text = json.dumps([self.model_class, self.config(quick).to_dict(), shapes, exporter, torch.__version__,
                           transformers.__version__], sort_keys=True, default=str)
        tags = ("-quick" if quick else "") + ("-dynamo" if dynamo else "")
        return f"{self.name}{tags}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


class FirstOutput(nn.Module):
    """A ``transformers`` model called with keyword inputs in a fixed order, returning its first output
    (``last_hidden_state``): ``torch.onnx.export`` passes positional tensors and wants tensors back."""

    def __init__(self, model: nn.Module, input_names: list[str]):
        super().__init__()
        self.model = model
        self.input_names = input_names

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        return self.model(**dict(zip(self.input_names, inputs)))[0]


class DecodeStep(nn.Module):
    """A causal LM's generation step with a KV cache, as generation exports it: new token ids, the
    attention mask over cached and new tokens, and each layer's cached keys and values in
    (``past.<layer>.key``/``.value``, (batch, kv heads, past, head size)); the logits and each
    layer's grown cache out. The batch, the new tokens and the past length are dynamic."""

    def __init__(self, model: nn.Module, input_names: list[str]):
        super().__init__()
        self.model = model
        self.layers = (len(input_names) - 2) // 2

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *past: torch.Tensor
                ) -> tuple[torch.Tensor, ...]:
        from transformers import DynamicCache

        cache = DynamicCache(ddp_cache_data=list(zip(past[0::2], past[1::2])), config=self.model.config)
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, past_key_values=cache, use_cache=True)
        return (out.logits, *[t for layer in out.past_key_values.layers for t in (layer.keys, layer.values)])

    def output_names(self) -> list[str]:
        return ["output", *[f"present.{i}.{kind}" for i in range(self.layers) for kind in ("key", "value")]]

    def dynamic_axes(self) -> dict[str, dict[int, str]]:
        """The TorchScript exporter's dynamic axes of every input and output."""
        axes = {"input_ids": {0: "batch", 1: "new"}, "attention_mask": {0: "batch", 1: "total"},
                "output": {0: "batch", 1: "new"}}
        for i in range(self.layers):
            for kind in ("key", "value"):
                axes[f"past.{i}.{kind}"] = {0: "batch", 2: "past"}
                axes[f"present.{i}.{kind}"] = {0: "batch", 2: "total"}
        return axes

    def dynamic_shapes(self) -> dict[str, Any]:
        """The dynamo exporter's dynamic shapes, by forward's parameters."""
        auto = torch.export.Dim.AUTO
        return {"input_ids": {0: auto, 1: auto}, "attention_mask": {0: auto, 1: auto},
                "past": tuple({0: auto, 2: auto} for _ in range(2 * self.layers))}

    def export(self, feeds: dict[str, np.ndarray]) -> onnx.ModelProto:
        """Exported by the TorchScript exporter at ``OPSET`` with ``dynamic_axes``."""
        buffer = io.BytesIO()
        with warnings.catch_warnings():  # the tracer's warnings on the cache's Python control flow
            warnings.simplefilter("ignore")
            torch.onnx.export(self, tuple(torch.from_numpy(x) for x in feeds.values()), buffer,
                              input_names=list(feeds), output_names=self.output_names(), opset_version=OPSET,
                              dynamic_axes=self.dynamic_axes(), dynamo=False)
        return onnx.load_from_string(buffer.getvalue())


def _images(size: int, quick_size: int = 32) -> Inputs:
    def make(quick: bool, batch: int) -> dict[str, np.ndarray]:
        side = quick_size if quick else size
        return {"pixel_values": np.random.default_rng(batch).standard_normal((batch, 3, side, side)).astype(np.float32)}
    return make


def _tokens(seq: int, vocab: int, mask: bool, quick_seq: int = 8, quick_vocab: int = 99, segments: bool = False,
            name: str = "input_ids") -> Inputs:
    """Token ids (under ``name``); with ``mask``, an attention mask whose last quarter is padding (the
    last half on a second row); with ``segments``, token type ids 0 then 1 (a sentence pair)."""

    def make(quick: bool, batch: int) -> dict[str, np.ndarray]:
        n, v = (quick_seq, quick_vocab) if quick else (seq, vocab)
        feeds = {name: np.random.default_rng(batch).integers(0, v, (batch, n), dtype=np.int64)}
        if mask:
            lengths = n - n // 4 - np.arange(batch) * (n // 4)
            feeds["attention_mask"] = (np.arange(n)[None, :] < lengths[:, None]).astype(np.int64)
        if segments:
            feeds["token_type_ids"] = np.repeat((np.arange(n) >= n // 2)[None, :], batch, axis=0).astype(np.int64)
        return feeds
    return make


def _merged(*parts: Inputs) -> Inputs:
    """The feeds of several inputs helpers together (an encoder-decoder's tokens, CLIP's text and image)."""

    def make(quick: bool, batch: int) -> dict[str, np.ndarray]:
        return {name: x for part in parts for name, x in part(quick, batch).items()}
    return make


def _decode_step(past: int, vocab: int, layers: int, kv_heads: int, head_size: int,
                 quick: tuple[int, int, int] = (2, 2, 8)) -> Inputs:
    """One new token after ``past`` cached ones (quick: 6) for ``DecodeStep``; ``quick`` is the tiny
    config's (layers, kv heads, head size). A second row is left-padded by 2 tokens, as batched
    generation pads, and each batch row beyond the first caches 3 more tokens: the check at
    ``CHECK_BATCH`` runs another past length than the export's."""

    def make(is_quick: bool, batch: int) -> dict[str, np.ndarray]:
        n_layers, heads, size = quick if is_quick else (layers, kv_heads, head_size)
        cached = (6 if is_quick else past) + 3 * (batch - 1)
        rng = np.random.default_rng(batch)
        mask = np.ones((batch, cached + 1), np.int64)
        mask[1:, :2] = 0
        feeds = {"input_ids": rng.integers(0, 99 if is_quick else vocab, (batch, 1), dtype=np.int64),
                 "attention_mask": mask}
        for i in range(n_layers):
            for kind in ("key", "value"):
                feeds[f"past.{i}.{kind}"] = rng.standard_normal((batch, heads, cached, size)).astype(np.float32)
        return feeds
    return make


def _signal(name: str, shape: tuple[int, ...], quick_shape: tuple[int, ...]) -> Inputs:
    def make(quick: bool, batch: int) -> dict[str, np.ndarray]:
        size = (batch, *(quick_shape if quick else shape))
        return {name: np.random.default_rng(batch).standard_normal(size).astype(np.float32)}
    return make


_TINY_TEXT = {"vocab_size": 99, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
              "intermediate_size": 64}

_TINY_VIT = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64,
             "image_size": 32, "patch_size": 8}
_VIT_TINY = {"hidden_size": 192, "num_hidden_layers": 12, "num_attention_heads": 3, "intermediate_size": 768}
_TINY_SEQ2SEQ = {"vocab_size": 99, "d_model": 32, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 4,
                 "decoder_attention_heads": 4, "encoder_ffn_dim": 64, "decoder_ffn_dim": 64}
_TINY_WAV2VEC2 = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64,
                  "conv_dim": [16, 16], "conv_kernel": [10, 3], "conv_stride": [5, 2], "num_feat_extract_layers": 2,
                  "num_conv_pos_embeddings": 8, "num_conv_pos_embedding_groups": 4}
# DeBERTa-v3's disentangled attention (v2's config defaults to none)
_DEBERTA_V3 = {"relative_attention": True, "pos_att_type": ["p2c", "c2p"], "norm_rel_ebd": "layer_norm",
               "share_att_key": True, "max_relative_positions": -1}
# a small Llama-family LM (TinyStories-sized): grouped-query attention, 8 query and 2 key/value heads
_SMALL_LM = {"vocab_size": 32000, "hidden_size": 512, "intermediate_size": 1376, "num_hidden_layers": 4,
             "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64}


def _seq2seq(source: int, target: int, vocab: int) -> Inputs:
    """An encoder-decoder's full forward: masked source tokens and the decoder's input ids."""
    return _merged(_tokens(source, vocab, mask=True),
                   _tokens(target, vocab, mask=False, quick_seq=4, name="decoder_input_ids"))


HF_ZOO: dict[str, HfModel] = {
    spec.name: spec
    for spec in (
        # vision, batch 1 at the checkpoints' resolution
        HfModel("mobilenet_v2", "MobileNetV2Model", "MobileNetV2Config", {}, {"depth_multiplier": 0.35, "image_size": 32},
                _images(224)),
        HfModel("mobilenet_v1", "MobileNetV1Model", "MobileNetV1Config", {}, {"depth_multiplier": 0.25, "image_size": 32},
                _images(224)),
        HfModel("efficientnet_b0", "EfficientNetModel", "EfficientNetConfig",
                {"width_coefficient": 1.0, "depth_coefficient": 1.0, "image_size": 224, "hidden_dim": 1280},
                {"width_coefficient": 0.25, "depth_coefficient": 0.25, "image_size": 32, "hidden_dim": 320},
                _images(224)),
        HfModel("resnet50", "ResNetModel", "ResNetConfig", {},
                {"embedding_size": 8, "hidden_sizes": [8, 16, 16, 32], "depths": [1, 1, 1, 1]}, _images(224)),
        HfModel("regnet", "RegNetModel", "RegNetConfig", {},
                {"embedding_size": 8, "hidden_sizes": [8, 16, 16, 32], "depths": [1, 1, 1, 1], "groups_width": 8},
                _images(224)),
        HfModel("convnext_tiny", "ConvNextModel", "ConvNextConfig", {},
                {"hidden_sizes": [8, 16, 16, 32], "depths": [1, 1, 1, 1]}, _images(224)),
        HfModel("mobilevit_small", "MobileViTModel", "MobileViTConfig", {},
                {"hidden_sizes": [16, 16, 16], "neck_hidden_sizes": [8, 8, 16, 16, 16, 16, 32], "image_size": 64,
                 "num_hidden_layers": 1}, _images(256, 64)),
        HfModel("swin_tiny", "SwinModel", "SwinConfig", {},
                {"image_size": 32, "patch_size": 2, "embed_dim": 8, "depths": [1, 1], "num_heads": [2, 2],
                 "window_size": 4}, _images(224)),
        HfModel("levit_128s", "LevitModel", "LevitConfig", {},
                {"image_size": 64, "hidden_sizes": [16, 32, 48], "num_attention_heads": [2, 2, 2], "depths": [1, 1, 1],
                 "key_dim": [8, 8, 8]}, _images(224, 64)),
        HfModel("poolformer_s12", "PoolFormerModel", "PoolFormerConfig", {},
                {"depths": [1, 1, 1, 1], "hidden_sizes": [8, 16, 16, 32]}, _images(224)),
        HfModel("dinov2_small", "Dinov2Model", "Dinov2Config",
                {"hidden_size": 384, "num_attention_heads": 6, "image_size": 518},
                {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64,
                 "image_size": 56}, _images(224, 28)),
        # text and audio, batch 1
        HfModel("distilbert", "DistilBertModel", "DistilBertConfig", {},
                {"vocab_size": 99, "dim": 32, "n_layers": 2, "n_heads": 4, "hidden_dim": 64},
                _tokens(128, 30522, mask=True)),
        HfModel("gpt2", "GPT2Model", "GPT2Config", {"use_cache": False},
                {"vocab_size": 99, "n_embd": 32, "n_layer": 2, "n_head": 4, "use_cache": False},
                _tokens(64, 50257, mask=True)),
        HfModel("llama_gqa", "LlamaModel", "LlamaConfig",
                {"vocab_size": 32000, "hidden_size": 512, "intermediate_size": 1376, "num_hidden_layers": 4,
                 "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64, "use_cache": False,
                 "attn_implementation": "eager"},
                {**_TINY_TEXT, "num_key_value_heads": 2, "head_dim": 8, "use_cache": False,
                 "attn_implementation": "eager"},
                _tokens(64, 32000, mask=True)),
        HfModel("t5_small_encoder", "T5EncoderModel", "T5Config", {"use_cache": False},
                {"vocab_size": 99, "d_model": 32, "d_kv": 8, "d_ff": 64, "num_layers": 2, "num_heads": 4,
                 "use_cache": False}, _tokens(64, 32128, mask=False)),
        HfModel("whisper_tiny_encoder", "WhisperModel.encoder", "WhisperConfig", {},
                {"d_model": 32, "encoder_layers": 2, "encoder_attention_heads": 4, "decoder_layers": 1,
                 "decoder_attention_heads": 4, "encoder_ffn_dim": 64, "decoder_ffn_dim": 64,
                 "num_mel_bins": 8, "max_source_positions": 16},
                _signal("input_features", (80, 3000), (8, 32))),
        HfModel("wav2vec2_base", "Wav2Vec2Model", "Wav2Vec2Config", {},
                {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64,
                 "conv_dim": [16, 16], "conv_kernel": [10, 3], "conv_stride": [5, 2], "num_feat_extract_layers": 2,
                 "num_conv_pos_embeddings": 8, "num_conv_pos_embedding_groups": 4},
                _signal("input_values", (16000,), (400,))),
        # session 20: more of what users export. Text encoders at 128 tokens, batch 1
        HfModel("bert_minilm", "BertModel", "BertConfig",  # all-MiniLM-L6-v2's shape, a sentence pair
                {"hidden_size": 384, "num_hidden_layers": 6, "num_attention_heads": 12, "intermediate_size": 1536},
                _TINY_TEXT, _tokens(128, 30522, mask=True, segments=True)),
        HfModel("roberta_base", "RobertaModel", "RobertaConfig", {}, _TINY_TEXT, _tokens(128, 50265, mask=True)),
        HfModel("albert_base", "AlbertModel", "AlbertConfig",
                {"hidden_size": 768, "num_attention_heads": 12, "intermediate_size": 3072},
                {**_TINY_TEXT, "embedding_size": 16}, _tokens(128, 30000, mask=True)),
        HfModel("electra_small", "ElectraModel", "ElectraConfig", {}, {**_TINY_TEXT, "embedding_size": 16},
                _tokens(128, 30522, mask=True)),
        HfModel("deberta_v3_small", "DebertaV2Model", "DebertaV2Config",
                {**_DEBERTA_V3, "hidden_size": 768, "num_hidden_layers": 6, "num_attention_heads": 12,
                 "intermediate_size": 3072, "vocab_size": 128100, "position_buckets": 256},
                {**_DEBERTA_V3, **_TINY_TEXT, "position_buckets": 8}, _tokens(128, 128100, mask=True)),
        HfModel("mpnet_base", "MPNetModel", "MPNetConfig", {}, _TINY_TEXT, _tokens(128, 30527, mask=True)),
        # encoder-decoders, a full forward (64 source tokens, 16 target ones): the logits
        HfModel("bart_base", "BartForConditionalGeneration", "BartConfig",
                {"d_model": 768, "encoder_layers": 6, "decoder_layers": 6, "encoder_attention_heads": 12,
                 "decoder_attention_heads": 12, "encoder_ffn_dim": 3072, "decoder_ffn_dim": 3072},
                _TINY_SEQ2SEQ, _seq2seq(64, 16, 50265)),
        HfModel("marian", "MarianMTModel", "MarianConfig",  # opus-mt-en-de's shape (the config's default is 2x wider)
                {"d_model": 512, "encoder_layers": 6, "decoder_layers": 6, "encoder_attention_heads": 8,
                 "decoder_attention_heads": 8, "encoder_ffn_dim": 2048, "decoder_ffn_dim": 2048, "pad_token_id": 0,
                 "decoder_start_token_id": 0},
                {**_TINY_SEQ2SEQ, "pad_token_id": 0, "decoder_start_token_id": 0}, _seq2seq(64, 16, 58101)),
        HfModel("t5_small", "T5ForConditionalGeneration", "T5Config", {"decoder_start_token_id": 0},
                {"vocab_size": 99, "d_model": 32, "d_kv": 8, "d_ff": 64, "num_layers": 2, "num_heads": 4,
                 "decoder_start_token_id": 0}, _seq2seq(64, 16, 32128)),
        HfModel("whisper_tiny", "WhisperForConditionalGeneration", "WhisperConfig",
                {"d_model": 384, "encoder_layers": 4, "decoder_layers": 4, "encoder_attention_heads": 6,
                 "decoder_attention_heads": 6, "encoder_ffn_dim": 1536, "decoder_ffn_dim": 1536},
                {"d_model": 32, "encoder_layers": 2, "encoder_attention_heads": 4, "decoder_layers": 1,
                 "decoder_attention_heads": 4, "encoder_ffn_dim": 64, "decoder_ffn_dim": 64, "vocab_size": 99,
                 "num_mel_bins": 8, "max_source_positions": 16, "pad_token_id": 0, "bos_token_id": 1,
                 "eos_token_id": 2, "decoder_start_token_id": 1},
                _merged(_signal("input_features", (80, 3000), (8, 32)),
                        _tokens(4, 51865, mask=False, quick_seq=4, name="decoder_input_ids"))),
        # causal LMs, one generation step with a KV cache of 127 tokens (quick: 6)
        HfModel("gpt2_decode", "GPT2LMHeadModel", "GPT2Config", {},
                {"vocab_size": 99, "n_embd": 32, "n_layer": 2, "n_head": 4}, _decode_step(127, 50257, 12, 12, 64, (2, 4, 8)),
                DecodeStep),
        HfModel("llama_decode", "LlamaForCausalLM", "LlamaConfig", _SMALL_LM,
                {**_TINY_TEXT, "num_key_value_heads": 2, "head_dim": 8}, _decode_step(127, 32000, 4, 2, 64),
                DecodeStep),
        HfModel("qwen2_decode", "Qwen2ForCausalLM", "Qwen2Config", _SMALL_LM,
                {**_TINY_TEXT, "num_key_value_heads": 2, "head_dim": 8}, _decode_step(127, 32000, 4, 2, 64),
                DecodeStep),
        HfModel("gemma_decode", "GemmaForCausalLM", "GemmaConfig", {**_SMALL_LM, "num_key_value_heads": 1},
                {**_TINY_TEXT, "num_key_value_heads": 1, "head_dim": 8}, _decode_step(127, 32000, 4, 1, 64, (2, 1, 8)),
                DecodeStep),
        HfModel("phi_decode", "PhiForCausalLM", "PhiConfig",
                {**_SMALL_LM, "num_key_value_heads": 8, "partial_rotary_factor": 0.5},
                {**_TINY_TEXT, "partial_rotary_factor": 0.5}, _decode_step(127, 32000, 4, 8, 64, (2, 4, 8)),
                DecodeStep),
        HfModel("pythia_70m_decode", "GPTNeoXForCausalLM", "GPTNeoXConfig",
                {"vocab_size": 50304, "hidden_size": 512, "num_hidden_layers": 6, "num_attention_heads": 8,
                 "intermediate_size": 2048}, _TINY_TEXT, _decode_step(127, 50304, 6, 8, 64, (2, 4, 8)), DecodeStep),
        HfModel("opt_decode", "OPTForCausalLM", "OPTConfig",
                {"vocab_size": 32000, "hidden_size": 512, "num_hidden_layers": 4, "num_attention_heads": 8,
                 "ffn_dim": 2048, "word_embed_proj_dim": 512},
                {"vocab_size": 99, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
                 "ffn_dim": 64, "word_embed_proj_dim": 32}, _decode_step(127, 32000, 4, 8, 64, (2, 4, 8)), DecodeStep),
        HfModel("bloom_decode", "BloomForCausalLM", "BloomConfig",
                {"vocab_size": 32000, "hidden_size": 512, "n_layer": 4, "n_head": 8},
                {"vocab_size": 99, "hidden_size": 32, "n_layer": 2, "n_head": 4},
                _decode_step(127, 32000, 4, 8, 64, (2, 4, 8)), DecodeStep),
        HfModel("falcon_decode", "FalconForCausalLM", "FalconConfig",
                {"vocab_size": 32000, "hidden_size": 512, "num_hidden_layers": 4, "num_attention_heads": 8,
                 "new_decoder_architecture": False, "multi_query": True},
                {"vocab_size": 99, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
                 "new_decoder_architecture": False, "multi_query": True},
                _decode_step(127, 32000, 4, 1, 64, (2, 1, 8)), DecodeStep),
        # vision, batch 1
        HfModel("vit_tiny", "ViTModel", "ViTConfig", _VIT_TINY, _TINY_VIT, _images(224)),
        HfModel("deit_tiny", "DeiTModel", "DeiTConfig", _VIT_TINY, _TINY_VIT, _images(224)),
        HfModel("beit_tiny", "BeitModel", "BeitConfig", {**_VIT_TINY, "use_relative_position_bias": True},
                {**_TINY_VIT, "use_relative_position_bias": True}, _images(224)),
        HfModel("segformer_b0", "SegformerForSemanticSegmentation", "SegformerConfig", {"num_labels": 150},
                {"depths": [1, 1, 1, 1], "hidden_sizes": [8, 16, 16, 32], "num_attention_heads": [1, 1, 2, 2],
                 "decoder_hidden_size": 32, "num_labels": 5}, _images(512, 64)),
        HfModel("yolos_tiny", "YolosForObjectDetection", "YolosConfig", {**_VIT_TINY, "image_size": [320, 320]},
                {**_TINY_VIT, "image_size": [32, 32], "num_detection_tokens": 5}, _images(320)),
        HfModel("clip_b32", "CLIPModel", "CLIPConfig", {},
                {"text_config": {**_TINY_TEXT, "max_position_embeddings": 16},
                 "vision_config": {**_TINY_VIT, "image_size": 32}, "projection_dim": 16},
                _merged(_tokens(16, 49408, mask=True), _images(224))),
        # audio, 1 s at 16 kHz
        HfModel("wav2vec2_ctc", "Wav2Vec2ForCTC", "Wav2Vec2Config", {}, {**_TINY_WAV2VEC2, "vocab_size": 20},
                _signal("input_values", (16000,), (400,))),
        HfModel("hubert_base", "HubertModel", "HubertConfig", {}, _TINY_WAV2VEC2, _signal("input_values", (16000,), (400,))),
    )
}

# ---------------------------------------------------------------------------- export and check


@dataclass
class Row(PairRatios):
    name: str
    shape: str = "-"
    status: str = "ok"  # "ok", or the stage that failed with the first line of its error
    convert_s: float | None = None
    max_diff: float | None = None  # the largest |ours - ort| over max |ort|
    ours: Timing | None = None
    ort: Timing | None = None

    @property
    def matches(self) -> bool:
        return self.max_diff is not None and self.max_diff <= TOLERANCE


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


def export_dynamo(module: nn.Module, feeds: dict[str, np.ndarray]) -> onnx.ModelProto:
    """``module`` exported by the dynamo exporter (torch 2.13's default) with dim 0 dynamic.

    It traces at the given feeds' batch: torch.export specializes a dim of size 1, so callers
    pass feeds at ``CHECK_BATCH``."""
    args = tuple(torch.from_numpy(x) for x in feeds.values())
    if isinstance(module, DecodeStep):
        outputs, dynamic = module.output_names(), module.dynamic_shapes()
    else:
        outputs, dynamic = ["output"], {"inputs": tuple({0: torch.export.Dim.AUTO} for _ in args)}
    with warnings.catch_warnings():  # the exporter's own deprecation and tracer warnings
        warnings.simplefilter("ignore")
        program = torch.onnx.export(
            module, args, input_names=list(feeds), output_names=outputs, opset_version=DYNAMO_OPSET,
            dynamic_shapes=dynamic, dynamo=True, verbose=False)
    return program.model_proto


def exported(spec: HfModel, quick: bool, cache: Path, dynamo: bool = False
             ) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """The model's ONNX export (TorchScript exporter, or the dynamo one) and its batch-1 feeds, from
    ``cache`` where an export of the same key is there."""
    feeds = spec.feeds(quick)
    path = cache / f"{spec.cache_key(quick, dynamo)}.onnx"
    if not path.exists():
        module = spec.build(quick)
        if dynamo:
            model = export_dynamo(module, spec.feeds(quick, CHECK_BATCH))
        else:
            model = module.export(feeds) if isinstance(module, DecodeStep) else export(module, feeds)
        cache.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        onnx.save(model, str(partial))
        partial.replace(path)  # a run killed mid-write leaves no truncated cache entry
        return model, feeds
    return onnx.load(str(path)), feeds


def relative_max_diff(got: np.ndarray, want: np.ndarray) -> float:
    if got.shape != want.shape:
        raise ValueError(f"output shape {got.shape}, onnxruntime's {want.shape}")
    scale = max(float(np.abs(want).max()), 1e-6)
    return float(np.abs(got.astype(np.float64) - want).max()) / scale


def bench(spec: HfModel, quick: bool, cache: Path, budget_s: float | None, dynamo: bool = False) -> Row:
    """Export, convert, check against onnxruntime at batch 1 and ``CHECK_BATCH`` and (with a budget)
    time one model at batch 1."""
    row = Row(spec.name)
    try:
        model, feeds = exported(spec, quick, cache, dynamo)
    except Exception as exc:  # torch's exporters refuse some models: a row, not a crash
        row.status = f"export failed: {ANSI_ESCAPE.sub('', first_line(exc))}"
        return row
    shapes = ["x".join(map(str, x.shape)) for x in feeds.values()]
    row.shape = " ".join(shapes[:SHOWN_INPUTS]) + (f" +{len(shapes) - SHOWN_INPUTS}" if len(shapes) > SHOWN_INPUTS else "")
    start = time.perf_counter()
    try:
        flow = load(flow_bytes(model, optimized=True))
    except Exception as exc:
        row.status = f"convert failed: {first_line(exc)}"
        return row
    row.convert_s = time.perf_counter() - start
    session = ort_session(model.SerializeToString())
    names = [o.name for o in model.graph.output]
    try:
        row.max_diff = max(
            relative_max_diff(np.asarray(flow.run(batch_feeds)[n]), want)
            for batch_feeds in (feeds, spec.feeds(quick, CHECK_BATCH))
            for n, want in zip(names, session.run(names, batch_feeds))
        )
    except Exception as exc:
        row.status = f"run failed: {first_line(exc)}"
        return row
    if not row.matches:
        row.status = "mismatch"
    if budget_s is not None:
        row.ours, row.ort = time_pair(lambda: flow.run(feeds), lambda: session.run(names, feeds),
                                      warmup=2, min_count=5, max_count=2000, budget_s=budget_s)
    return row


# ------------------------------------------------------------------------------------ the report


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def render(rows: list[Row]) -> str:
    lines = ["| model | input | status | convert s | max diff (rel) | ours ms | ort ms | ours/ort | min ours/ort |",
             "|" + "---|" * 9]
    for r in rows:
        lines.append(
            f"| {r.name} | {r.shape} | {r.status} | {_fmt(r.convert_s, '.1f')} | {_fmt(r.max_diff, '.1e')} "
            f"| {_fmt(r.ours and r.ours.median_ms, '.2f')} | {_fmt(r.ort and r.ort.median_ms, '.2f')} "
            f"| {_fmt(r.ratio, '.2f')} | {_fmt(r.min_ratio, '.2f')} |"
        )
    return "\n".join(lines)


def summary(rows: list[Row]) -> str:
    converted = [r for r in rows if r.convert_s is not None]
    lines = [f"converted {len(converted)}/{len(rows)}; within {TOLERANCE:g} of onnxruntime "
             f"{sum(r.matches for r in rows)}/{len(rows)}"]
    failed = [f"{r.name} ({r.status})" for r in rows if r.status != "ok"]
    if failed:
        lines.append("not ok: " + "; ".join(failed))
    timed = [r for r in rows if r.ratio is not None]
    if timed:
        geomean = math.exp(sum(math.log(r.ratio) for r in timed) / len(timed))
        worst = max(timed, key=lambda r: r.ratio)
        min_geomean = math.exp(sum(math.log(r.min_ratio) for r in timed) / len(timed))
        lines.append(f"geometric mean ours/ort over {len(timed)} models: {geomean:.2f} (of the min ratios "
                     f"{min_geomean:.2f}); worst: {worst.name} {worst.ratio:.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=None, help=f"comma-separated subset of {', '.join(HF_ZOO)}")
    parser.add_argument("--quick", action="store_true", help="tiny configs and budgets: a smoke run")
    parser.add_argument("--budget", type=float, default=None, help="seconds of timed pairs per model (default 3, quick 0.2)")
    parser.add_argument("--no-timing", action="store_true", help="export, convert and check only")
    parser.add_argument("--dynamo", action="store_true", help=f"the dynamo exporter (opset {DYNAMO_OPSET})")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help=f"exports cache (default {DEFAULT_CACHE})")
    args = parser.parse_args(argv)
    names = chosen_models(parser, args.models, HF_ZOO)
    budget = None if args.no_timing else (args.budget if args.budget is not None else (0.2 if args.quick else 3.0))

    print(machine(), flush=True)
    print(f"load average at the start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)
    exporter = f"dynamo, opset {DYNAMO_OPSET}" if args.dynamo else f"TorchScript, opset {OPSET}"
    print(f"torch.onnx.export ({exporter}) -> import_onnx + optimize + flow_writer; "
          "onnxruntime: intra_op_num_threads=2, inter_op_num_threads=1", flush=True)
    rows = []
    for name in names:
        start = time.perf_counter()
        row = bench(HF_ZOO[name], args.quick, args.cache, budget, args.dynamo)
        rows.append(row)
        ratio = f", ours/ort {row.ratio:.2f}" if row.ratio is not None else ""
        print(f"  {name}: {row.status}, max diff {_fmt(row.max_diff, '.1e')}{ratio} "
              f"({time.perf_counter() - start:.0f} s)", flush=True)
    print(f"load average at the end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)
    print()
    print(render(rows))
    print(summary(rows))
    return 0 if all(r.status == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
