# examples/llamacpp/server/tests/stories-gguf.sh - sourced by make-models.sh and make-law-draft.sh:
# what both do to turn a llama2.c checkpoint of stories260K into a GGUF file. Expects $convert
# (llama-convert-llama2c-to-ggml), $vocab (stories260K.tok512.bin), $src (the llama.cpp source, for
# gguf-py), $log and a die function.
python=/usr/bin/python3

# to_gguf CHECKPOINT OUT: converts CHECKPOINT with stories260K's vocabulary to OUT (through
# OUT.tmp), then sets llama.context_length to the checkpoint's seq_len (the converter writes 128;
# stories260K's is 512) with the source tree's gguf-py.
to_gguf() {
  local ckpt=$1 out=$2 seq_len
  "$convert" --copy-vocab-from-model "$vocab" --llama2c-model "$ckpt" \
    --llama2c-output-model "$out.tmp" >>"$log" 2>&1 || { tail -n 20 "$log" >&2; die "converting $ckpt failed"; }
  seq_len=$("$python" -c 'import struct,sys; print(struct.unpack("<7i", open(sys.argv[1], "rb").read(28))[6])' "$ckpt")
  PYTHONPATH=$src/gguf-py "$python" "$src/gguf-py/gguf/scripts/gguf_set_metadata.py" "$out.tmp" \
    llama.context_length "$seq_len" --force >>"$log" 2>&1 ||
    { tail -n 20 "$log" >&2; die "setting llama.context_length failed"; }
  mv "$out.tmp" "$out"
}

# gguf_fields FILE KEY...: the integer values of the keys, space-separated.
gguf_fields() {
  local file=$1
  shift
  PYTHONPATH=$src/gguf-py "$python" -c '
import sys; from gguf import GGUFReader
r = GGUFReader(sys.argv[1])
print(" ".join(str(int(r.get_field(k).parts[r.get_field(k).data[0]][0])) for k in sys.argv[2:]))' "$file" "$@"
}
