"""Tiny random-weight Hugging Face models saved to local folders, built offline.

Each builder writes a model folder (config, safetensors weights and, for text models, a
word-level tokenizer trained on a few sentences with the ``tokenizers`` library; for the vision
model an image processor) and returns its path.
Needs the [models] extra; nothing is downloaded.
"""

from __future__ import annotations

from pathlib import Path

SENTENCES = [
    "attention maps show how each token looks at the other tokens of the text",
    "every layer of the model has several heads and each head has its own map",
    "the rank of a map is the number of directions it really uses",
    "a small model with random weights still forms scores and a softmax",
]
TEXT = " ".join(SENTENCES)


def _tokenizer(folder: Path, *, bos: bool) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(SENTENCES, trainers.WordLevelTrainer(
        special_tokens=["[PAD]", "[UNK]", "[BOS]"]))
    if bos:
        tok.post_processor = processors.TemplateProcessing(
            single="[BOS] $A", special_tokens=[("[BOS]", tok.token_to_id("[BOS]"))])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]",
                                   bos_token="[BOS]")
    fast.save_pretrained(str(folder))


def _save(model, folder: Path) -> Path:  # noqa: ANN001
    model.save_pretrained(str(folder))
    return folder


def vocab_size() -> int:
    return len({w for s in SENTENCES for w in s.split()}) + 3


def build(kind: str, root: Path) -> Path:
    """Builds the tiny model ``kind`` (bert, gpt2, llama, qwen2, t5, vit, blip2) under ``root``."""
    import torch
    import transformers as tf

    torch.manual_seed(0)
    folder = root / kind
    folder.mkdir(parents=True, exist_ok=True)
    V = vocab_size()
    common = {"initializer_range": 0.3}
    if kind == "bert":
        cfg = tf.BertConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2,
                            num_attention_heads=4, intermediate_size=64,
                            max_position_embeddings=64, **common)
        model = tf.BertModel(cfg)
    elif kind == "gpt2":
        cfg = tf.GPT2Config(vocab_size=V, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                            bos_token_id=2, eos_token_id=2, **common)
        model = tf.GPT2Model(cfg)
    elif kind in ("llama", "qwen2"):
        Config, Model = ((tf.LlamaConfig, tf.LlamaModel) if kind == "llama"
                         else (tf.Qwen2Config, tf.Qwen2Model))
        cfg = Config(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2,
                     max_position_embeddings=64, **common)
        model = Model(cfg)
    elif kind == "t5":
        cfg = tf.T5Config(vocab_size=V, d_model=32, d_kv=8, d_ff=64, num_layers=2,
                          num_decoder_layers=2, num_heads=4, decoder_start_token_id=0,
                          pad_token_id=0, initializer_factor=3.0)
        model = tf.T5Model(cfg)
    elif kind == "vit":
        cfg = tf.ViTConfig(image_size=16, patch_size=4, num_channels=3, hidden_size=32,
                           num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                           **common)
        model = tf.ViTModel(cfg)
        # the folder's own image processor (a vision folder without one is refused); images
        # are already in [0, 1] at the model's size
        tf.ViTImageProcessor(size={"height": 16, "width": 16}, do_rescale=False).save_pretrained(
            str(folder))
        return _save(model, folder)
    elif kind == "blip2":
        # BLIP-2 in miniature: 8 learned queries on 17 image tokens (16 patches + CLS), a
        # Q-Former with cross-attention every second layer, a one-layer OPT it never runs
        vision = tf.Blip2VisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, image_size=16, patch_size=4,
                                      initializer_range=0.3)
        qformer = tf.Blip2QFormerConfig(hidden_size=32, num_hidden_layers=4,
                                        num_attention_heads=4, intermediate_size=64,
                                        encoder_hidden_size=32, cross_attention_frequency=2,
                                        vocab_size=V, initializer_range=0.3)
        text = tf.OPTConfig(vocab_size=V, hidden_size=32, num_hidden_layers=1, ffn_dim=64,
                            num_attention_heads=4, word_embed_proj_dim=32,
                            max_position_embeddings=64)
        cfg = tf.Blip2Config(vision_config=vision.to_dict(), qformer_config=qformer.to_dict(),
                             text_config=text.to_dict(), num_query_tokens=8,
                             initializer_range=0.3)
        model = tf.Blip2Model(cfg)
        tf.BlipImageProcessor(size={"height": 16, "width": 16}).save_pretrained(str(folder))
        return _save(model, folder)
    else:
        raise ValueError(kind)
    _tokenizer(folder, bos=kind in ("gpt2", "llama", "qwen2"))
    return _save(model, folder)
