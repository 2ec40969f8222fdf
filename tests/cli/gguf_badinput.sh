#!/usr/bin/env bash
# Bad GGUF models through the whole CLI: each case must end with a one-line
# error naming what is wrong and a non-zero exit status (and no sanitizer
# report when $DSV4_BIN is an ASan/UBSan build). Files are edited copies of
# the GGUF oracle fixtures (tests/cli/gguf_edit.py).
set -u
BIN=${DSV4_BIN:-build/dsv4}
. tests/python.sh
G=tests/fixtures/gguf-all-types/model.gguf
SP=tests/fixtures/gguf-split-q8-mxfp4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

CASE_PREFIX=gguf_badinput_
. tests/expect_error.sh

score() { "$BIN" score --device cpu --model "$1" --tokens 1,2,3,4,5,6,7,8,9 --logits-out "$tmp/out.f32"; }
ed() { local out=$tmp/$1.gguf; shift; $PY tests/cli/gguf_edit.py $G "$out" "$@"; }

ed trunc truncate 100000;                    case_ truncated "runs past the end" -- score $tmp/trunc.gguf
ed trunc2 truncate 3000;                     case_ truncated_header "285 strings cannot fit in the" -- score $tmp/trunc2.gguf
ed v2 truncate 0; printf 'GGUF\002\000\000\000' > $tmp/v2.gguf; head -c 1000 $G | tail -c +9 >> $tmp/v2.gguf
case_ version_2 "version 2 is not supported" -- score $tmp/v2.gguf
{ head -c 8 $G; printf '\377\377\377\377\377\377\377\177'; tail -c +17 $G; } > $tmp/huge.gguf
case_ huge_tensor_count "more than the file can hold" -- score $tmp/huge.gguf
ed off offset blk.1.attn_kv.weight 999999999744; case_ bad_offset "blk.1.attn_kv.weight" -- score $tmp/off.gguf
ed ovl offset blk.0.attn_norm.weight 0;      case_ overlap "overlap" -- score $tmp/ovl.gguf
ed unk type blk.0.attn_kv.weight 77;         case_ unknown_type "unknown ggml type 77" -- score $tmp/unk.gguf
ed q40 type blk.1.ffn_down_exps.weight 2;    case_ unsupported_type "Q4_0: this GGUF type is not supported" -- score $tmp/q40.gguf
ed blk type blk.0.attn_q_b.weight 12;        case_ partial_block "not whole Q4_K blocks" -- score $tmp/blk.gguf
ed shp dims blk.2.attn_kv.weight 512,32;     case_ wrong_shape "blk.2.attn_kv.weight" -- score $tmp/shp.gguf
ed vq type blk.0.attn_norm.weight 8;         case_ quantized_vector "expected F32/F16/BF16 for a vector" -- score $tmp/vq.gguf
ed miss rename blk.1.ffn_up_exps.weight blk.1.ffn_upx.weight
case_ missing_tensor "blk.1.ffn_up_exps.weight" -- score $tmp/miss.gguf
ed hash i32 blk.0.ffn_gate_tid2eid.weight 5 9; case_ tid2eid_out_of_range "tid2eid" -- score $tmp/hash.gguf
ed e8m0 u8 blk.0.ffn_down_exps.weight 680 230  # row 40's block (17 bytes each): scale 2^102
case_ mxfp4_scale_out_of_range "blk.0.ffn_down_exps.weight' row 40 block 0: E8M0 scale byte 230 is above 219" -- score $tmp/e8m0.gguf
ed e8nan u8 blk.1.ffn_down_shexp.weight 0 255; case_ mxfp4_scale_nan "E8M0 scale byte 255 is NaN" -- score $tmp/e8nan.gguf
ed inf0 u8 blk.1.attn_q_b.weight 170 0         # row 5's Q8_0 d (34-byte blocks) = 0x7c00
$PY tests/cli/gguf_edit.py $tmp/inf0.gguf $tmp/inf.gguf u8 blk.1.attn_q_b.weight 171 124
case_ f16_scale_infinite "blk.1.attn_q_b.weight' row 5 block 0: f16 scale 0x7c00 is infinite" -- score $tmp/inf.gguf
ed nan16 u8 token_embd.weight 1 255             # row 0's Q4_K d: 0xffNN
case_ f16_scale_nan "token_embd.weight' row 0 block 0: f16 scale 0xff[0-9a-f]* is NaN" -- score $tmp/nan16.gguf
ed arch setstr general.architecture llama;    case_ wrong_architecture "'llama' is not deepseek4" -- score $tmp/arch.gguf
ed nokey dropkey deepseek4.attention.head_count; case_ missing_key "deepseek4.attention.head_count: missing" -- score $tmp/nokey.gguf
ed ratios dropkey deepseek4.attention.compress_ratios; case_ missing_ratios "compress_ratios" -- score $tmp/ratios.gguf
ed kvh setu32 deepseek4.attention.head_count_kv 4; case_ kv_heads "head_count_kv" -- score $tmp/kvh.gguf
ed dim0 dropkey deepseek4.embedding_length_out  # (else that key's check fires first)
$PY tests/cli/gguf_edit.py $tmp/dim0.gguf $tmp/dim.gguf setu32 deepseek4.embedding_length 256
case_ config_shape_mismatch "shape" -- score $tmp/dim.gguf
ed eout setu32 deepseek4.embedding_length_out 1000; case_ stream_width "embedding_length_out" -- score $tmp/eout.gguf
ed gate setu32 deepseek4.expert_gating_func 7; case_ gating "expert_gating_func" -- score $tmp/gate.gguf
mkdir -p $tmp/sp; cp $SP/*.gguf $tmp/sp/; rm $tmp/sp/model-00003-of-00004.gguf
case_ missing_split_part "missing part 3 of 4" -- score $tmp/sp/model-00001-of-00004.gguf
case_ not_first_part "open the first part" -- score $SP/model-00002-of-00004.gguf
