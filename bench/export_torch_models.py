#!/usr/bin/env python3
"""export_torch_models: the models people deploy, as PyTorch exports them, for trying tunefarm on
files nobody working on it wrote (not CI: PyTorch from PyPI is gigabytes).

Writes torchvision's ResNet-18 and -50, Wide ResNet-50-2, MobileNetV2, MobileNetV3-Small and
-Large, EfficientNet-B0, -B3 and V2-S, ViT-B/16, ConvNeXt-T, GoogLeNet, Inception-v3, MNASNet 1.0
and 0.5, RegNetY-400MF, RegNetX-400MF, ShuffleNetV2 1.0 and 0.5, Swin-T and Swin V2-T, MaxViT-T,
SqueezeNet 1.1, ResNeXt-50 32x4d, DenseNet-121, VGG-11 (batch norm) and AlexNet; Hugging Face's
BERT, DistilBERT and MiniLM encoders, and (other_transformers) GPT-2, LLaMA, Qwen2, T5's and
RoBERTa's encoders, DeiT, MobileViT, SegFormer, ConvNeXt V2, wav2vec 2.0 and Whisper's encoder
(two layers where they have layers, built from a config), all with random weights (weights=None:
nothing is downloaded), each both ways:
  <name>.dynamo.onnx        torch.onnx.export(..., dynamo=True): IR 10, opset 18 (or --opset),
                            weights in <name>.dynamo.onnx.data beside it;
  <name>.torchscript.onnx   dynamo=False, opset 17.
Then prints a table of the files: IR version, opset, operator counts.

The transformers take what users feed them: int64 token ids (`input_ids`) and an int64
`attention_mask`, both [1, seq]; `pixel_values` (Hugging Face's vision models), `input_values`
(wav2vec 2.0: [1, 16000]) and `input_features` (Whisper: [1, 80, 3000]); torchvision's images are
`x`, float32.

Run it in a virtual environment of its own:
    python3 -m venv build/bench-venv
    build/bench-venv/bin/pip install torch torchvision transformers onnxscript onnx
    build/bench-venv/bin/python bench/export_torch_models.py build/models/torch
then carry every file through tasks, submit --trials 64, build and model_bench on a farm of its
own (bench/run_torch_models.py, hours on two cores), or one file by hand, with tunerd running:
    tune-client tasks --model build/models/torch/resnet18.dynamo.onnx
    tune-client submit --model build/models/torch/resnet18.dynamo.onnx --trials 64 --watch
    tune-client build --model build/models/torch/resnet18.dynamo.onnx -o build/out/resnet18
    build/venv/bin/python bench/model_bench.py --model build/models/torch/resnet18.dynamo.onnx \\
        --artifact build/out/resnet18
"""
import argparse
import collections
import os
import sys

import onnx
import torch


def vision_models(size):
    import torchvision.models as m

    return {
        "resnet18": lambda: m.resnet18(weights=None),
        "mobilenet_v2": lambda: m.mobilenet_v2(weights=None),
        "mobilenet_v3_small": lambda: m.mobilenet_v3_small(weights=None),
        "efficientnet_b0": lambda: m.efficientnet_b0(weights=None),
        "vit_b_16": lambda: m.vit_b_16(weights=None),
        "convnext_tiny": lambda: m.convnext_tiny(weights=None),
        "googlenet": lambda: m.googlenet(weights=None, aux_logits=False, init_weights=True),
        "mnasnet1_0": lambda: m.mnasnet1_0(weights=None),
        "regnet_y_400mf": lambda: m.regnet_y_400mf(weights=None),
        "shufflenet_v2_x1_0": lambda: m.shufflenet_v2_x1_0(weights=None),
        "swin_t": lambda: m.swin_t(weights=None),
        "squeezenet1_1": lambda: m.squeezenet1_1(weights=None),
        "inception_v3": lambda: m.inception_v3(weights=None, aux_logits=False, init_weights=True),
        "resnext50_32x4d": lambda: m.resnext50_32x4d(weights=None),
        "densenet121": lambda: m.densenet121(weights=None),
        "mobilenet_v3_large": lambda: m.mobilenet_v3_large(weights=None),
        "alexnet": lambda: m.alexnet(weights=None),
        "efficientnet_v2_s": lambda: m.efficientnet_v2_s(weights=None),
        "resnet50": lambda: m.resnet50(weights=None),
        "wide_resnet50_2": lambda: m.wide_resnet50_2(weights=None),
        "regnet_x_400mf": lambda: m.regnet_x_400mf(weights=None),
        "shufflenet_v2_x0_5": lambda: m.shufflenet_v2_x0_5(weights=None),
        "mnasnet0_5": lambda: m.mnasnet0_5(weights=None),
        "efficientnet_b3": lambda: m.efficientnet_b3(weights=None),
        "maxvit_t": lambda: m.maxvit_t(weights=None),
        "swin_v2_t": lambda: m.swin_v2_t(weights=None),
        "vgg11_bn": lambda: m.vgg11_bn(weights=None),
    }, torch.randn(1, 3, size, size)


class LastHiddenState(torch.nn.Module):
    """A transformers model as users export it: its inputs by name (token ids and the attention
    mask; pixel values; audio), the last hidden state out."""

    def __init__(self, model, names=("input_ids", "attention_mask")):
        super().__init__()
        self.model = model
        self.names = names

    def forward(self, *inputs):
        return self.model(**dict(zip(self.names, inputs))).last_hidden_state


def text_models(seq):
    import transformers as t

    def bert(hidden, heads, ffn):
        config = t.BertConfig(hidden_size=hidden, num_hidden_layers=2, num_attention_heads=heads,
                              intermediate_size=ffn)
        return LastHiddenState(t.BertModel(config))

    def distilbert():
        config = t.DistilBertConfig(n_layers=2)
        return LastHiddenState(t.DistilBertModel(config))

    # Token ids over the vocabulary (BERT's and DistilBERT's are the same size), and a mask that
    # pads the last quarter of the sequence, as a batch of one shorter sentence is fed.
    input_ids = torch.randint(0, t.BertConfig().vocab_size, (1, seq))
    attention_mask = torch.ones(1, seq, dtype=torch.int64)
    attention_mask[:, seq - seq // 4:] = 0
    return {
        "bert_base_2l": lambda: bert(768, 12, 3072),
        "minilm_l2": lambda: bert(384, 12, 1536),
        "distilbert_2l": distilbert,
    }, (input_ids, attention_mask)


def other_transformers(seq):
    """Decoders without their KV cache (GPT-2; LLaMA and Qwen2 with grouped-query attention), T5's and
    RoBERTa's encoders, DeiT, MobileViT, SegFormer, ConvNeXt V2, wav2vec 2.0 and Whisper's encoder:
    small configs (two layers; a vocabulary of 1000), each with the example it takes and its
    inputs' names."""
    import transformers as t

    ids = torch.randint(0, 1000, (1, seq))
    mask = torch.ones(1, seq, dtype=torch.int64)
    mask[:, seq - seq // 4:] = 0
    tokens = ((ids, mask), ("input_ids", "attention_mask"))

    def pixels(size):
        return (torch.randn(1, 3, size, size),), ("pixel_values",)

    decoder = dict(hidden_size=512, intermediate_size=1376, num_hidden_layers=2, num_attention_heads=8,
                   num_key_value_heads=2, vocab_size=1000, use_cache=False)
    return {
        "gpt2_2l": (lambda: t.GPT2Model(t.GPT2Config(n_layer=2, use_cache=False)), tokens),
        "llama_2l": (lambda: t.LlamaModel(t.LlamaConfig(**decoder)), tokens),
        "qwen2_2l": (lambda: t.Qwen2Model(t.Qwen2Config(**decoder)), tokens),
        "t5_enc_2l": (lambda: t.T5EncoderModel(t.T5Config(num_layers=2, d_model=512, d_ff=2048, num_heads=8,
                                                         vocab_size=1000)), tokens),
        "roberta_2l": (lambda: t.RobertaModel(t.RobertaConfig(num_hidden_layers=2, vocab_size=1000)), tokens),
        "deit_tiny": (lambda: t.ViTModel(t.ViTConfig(hidden_size=192, num_hidden_layers=2, num_attention_heads=3,
                                                     intermediate_size=768)), pixels(224)),
        "mobilevit_s": (lambda: t.MobileViTModel(t.MobileViTConfig()), pixels(256)),
        "segformer_b0": (lambda: t.SegformerModel(t.SegformerConfig()), pixels(256)),
        "convnextv2_2222": (lambda: t.ConvNextV2Model(t.ConvNextV2Config(depths=[2, 2, 2, 2])), pixels(224)),
        "wav2vec2_2l": (lambda: t.Wav2Vec2Model(t.Wav2Vec2Config(num_hidden_layers=2)),
                        ((torch.randn(1, 16000),), ("input_values",))),
        "whisper_enc_2l": (lambda: t.WhisperModel(t.WhisperConfig(encoder_layers=2, decoder_layers=1, d_model=384,
                                                                  encoder_attention_heads=6,
                                                                  encoder_ffn_dim=1536)).encoder,
                           ((torch.randn(1, 80, 3000),), ("input_features",))),
    }


def export(model, example, names, path, dynamo, opset):
    names = list(names)
    model.eval()
    # Layers initialized to zeros (ViT's classifier) would make the output zero whatever the rest
    # computes: random weights there too, so that comparing outputs means something.
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2 and not p.any():
                torch.nn.init.normal_(p, std=0.02)
    with torch.no_grad():
        if dynamo:
            torch.onnx.export(model, example, path, dynamo=True, opset_version=opset, external_data=True,
                              input_names=names)
        else:
            torch.onnx.export(model, example, path, dynamo=False, opset_version=17, input_names=names)


def describe(path):
    m = onnx.load(path, load_external_data=False)
    opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), 0)
    ops = collections.Counter(n.op_type for n in m.graph.node)
    top = ", ".join(f"{op} x{n}" for op, n in ops.most_common(8))
    return f"IR {m.ir_version}, opset {opset}, {sum(ops.values())} nodes: {top}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--opset", type=int, default=18, help="the dynamo exporter's opset (18 to 20)")
    parser.add_argument("--size", type=int, default=224, help="image size")
    parser.add_argument("--seq", type=int, default=128, help="sequence length of the encoders")
    parser.add_argument("--only", nargs="*", help="export only these models")
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    torch.manual_seed(0)
    # nn.MultiheadAttention's inference fast path is one fused operator the TorchScript exporter
    # cannot write; without it, attention is written as the matrix products it is.
    torch.backends.mha.set_fastpath_enabled(False)
    jobs = []
    vision, image = vision_models(args.size)
    for name, make in vision.items():
        jobs.append((name, make, (image,), ("x",)))
    text, tokens = text_models(args.seq)
    for name, make in text.items():
        jobs.append((name, make, tokens, ("input_ids", "attention_mask")))
    for name, (make, (example, names)) in other_transformers(args.seq).items():
        jobs.append((name, lambda make=make, names=names: LastHiddenState(make(), names), example, names))
    failed = 0
    for name, make, example, names in jobs:
        if args.only and name not in args.only:
            continue
        for dynamo in (True, False):
            path = os.path.join(args.out_dir, f"{name}.{'dynamo' if dynamo else 'torchscript'}.onnx")
            try:
                export(make(), example, names, path, dynamo, args.opset)
                print(f"{path}: {describe(path)}", flush=True)
            except Exception as e:  # One model's failure is reported; the others go on.
                failed += 1
                print(f"{path}: export failed: {str(e).splitlines()[0] if str(e) else type(e).__name__}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
