#!/usr/bin/python3
"""examples/llamacpp/server/tests/cut-vocab.py IN OUT N: a GGUF model whose vocabulary is IN's
without its last N tokens (their tokenizer entries and their rows of token_embd and output), for
the test of a draft model with a smaller vocabulary than the target's (llama.cpp pairs models whose
vocabularies differ by up to 128 tokens and agree on the ids they share, as Qwen2.5 7B and 0.5B
do). The ids kept are IN's, so the pair passes llama.cpp's compatibility check. F32 tensors only
(what make-law-draft.sh makes). Needs gguf-py on PYTHONPATH (the pinned llama.cpp's) and numpy.
"""

import sys

import numpy as np
from gguf import GGUFReader, GGUFValueType, GGUFWriter

VOCAB_ARRAYS = ("tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type")
VOCAB_TENSORS = ("token_embd.weight", "output.weight")


def field_value(field):
    """A scalar, string or array field of a GGUFReader as a Python value."""
    kind = field.types[0]
    if kind == GGUFValueType.ARRAY:
        item = field.types[1]
        if item == GGUFValueType.STRING:
            return [bytes(field.parts[i]).decode("utf-8") for i in field.data]
        return [field.parts[i].tolist()[0] for i in field.data]
    if kind == GGUFValueType.STRING:
        return bytes(field.parts[field.data[0]]).decode("utf-8")
    return field.parts[field.data[0]].tolist()[0]


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: cut-vocab.py IN OUT N")
    src, dst, n_cut = sys.argv[1], sys.argv[2], int(sys.argv[3])
    reader = GGUFReader(src)
    n_vocab = len(reader.fields["tokenizer.ggml.tokens"].data)
    if not 0 < n_cut < n_vocab:
        sys.exit(f"cut-vocab.py: N must be in 1..{n_vocab - 1}")
    keep = n_vocab - n_cut
    arch = field_value(reader.fields["general.architecture"])
    writer = GGUFWriter(dst, arch)
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        kind = field.types[0]
        value = field_value(field)
        if name in VOCAB_ARRAYS:
            value = value[:keep]
        if kind == GGUFValueType.ARRAY:
            writer.add_key_value(name, value, kind, sub_type=field.types[1])
        else:
            writer.add_key_value(name, value, kind)
    for tensor in reader.tensors:
        if tensor.tensor_type.name != "F32":
            sys.exit(f"cut-vocab.py: {tensor.name} is {tensor.tensor_type.name}; only F32 is cut")
        data = np.array(tensor.data, dtype=np.float32).reshape(list(reversed(tensor.shape.tolist())))
        if tensor.name in VOCAB_TENSORS:
            data = np.ascontiguousarray(data[:keep])
        writer.add_tensor(tensor.name, data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(f"cut-vocab.py: {dst}: {keep} tokens ({src} has {n_vocab})")


if __name__ == "__main__":
    main()
