"""Random valid blocks of ggml quant types (shared by the test-vector and
fixture generators). A block is valid when its f16 scales are finite: every
other bit pattern (grid indices, sign groups, nibbles) is a legal encoding.
`scale` sets the typical magnitude of the f16 super-block scale so the
dequantized weights land where a model's weights would."""
import numpy as np
from gguf.constants import GGMLQuantizationType as T, GGML_QUANT_SIZES

# byte offsets of the f16 scale fields inside each block
F16_FIELDS = {
    T.Q8_0: [0], T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2],
    T.Q6_K: [208], T.IQ4_XS: [0], T.IQ2_XXS: [0], T.IQ2_S: [0], T.IQ3_XXS: [0], T.IQ3_S: [0],
}
QUANT_TYPES = [T.Q8_0, T.Q4_K, T.Q5_K, T.Q6_K, T.Q3_K, T.Q2_K, T.IQ4_XS, T.IQ3_XXS, T.IQ3_S,
               T.IQ2_XXS, T.IQ2_S, T.MXFP4]


def random_blocks(rng, qtype, n_blocks, scale=None):
    """n_blocks random valid blocks as a uint8 array [n_blocks, type_size].
    scale None: f16 scales drawn over the whole finite range (test vectors);
    else |d| ~ scale (positive and negative)."""
    _, size = GGML_QUANT_SIZES[qtype]
    b = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    if qtype == T.MXFP4:
        if scale is None:
            b[:, 0] = rng.integers(0, 251, size=n_blocks)
        else:  # e8m0 exponent around log2(scale)
            e = np.round(np.log2(scale)) + 127 + rng.integers(-1, 2, size=n_blocks)
            b[:, 0] = e.astype(np.uint8)
        return b
    for off in F16_FIELDS[qtype]:
        if scale is None:
            bits = rng.integers(0, 0x10000, size=n_blocks).astype(np.uint16)
            bits = np.where((bits & 0x7C00) == 0x7C00, bits & 0x83FF, bits)  # no inf/nan
            d = bits.view(np.float16)
        else:
            d = (scale * rng.uniform(0.5, 1.5, size=n_blocks) * rng.choice([-1, 1], size=n_blocks)).astype(np.float16)
        b[:, off:off + 2] = d.view(np.uint8).reshape(n_blocks, 2)
    return b
