"""The fast path for `NCCL_DEBUG_SUBSYS=COLL` lines, which make up nearly all of a big log.

The parser hands over, per line, the text after ` opCount ` (the "tail"); this module checks a
whole batch of tails with one Arrow (RE2) regex, splits the good ones on spaces and converts
the tokens with Arrow compute, so no Python object is created per field. TAIL accepts a
subset of what grammar.COLL accepts (the 2.4+ shape, printable ASCII tokens); every other
tail is returned for the regex path, which yields identical rows.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from commwall.ingest.formats.nccl_log.grammar import DATATYPES
from commwall.ingest.formats.nccl_log.tables import SCHEMAS

TAIL = (
    r"^[0-9a-f]{1,15} sendbuff [\x21-\x7e]+ recvbuff [\x21-\x7e]+ count [0-9]{1,15} "
    r"datatype [0-9]{1,3} op [0-9]{1,9} root -?[0-9]{1,9} comm 0x[0-9a-f]+ "
    r"\[nranks=[0-9]{1,9}\] stream [\x21-\x7e]+[ \t\r\n]*$"
)
#: Position of each field among the space-separated tokens of a tail TAIL matches.
TOKENS = {"opcount": 0, "count": 6, "dtype": 8, "redop": 10, "root": 12, "comm": 14,
          "nranks": 15, "stream": 17}  # fmt: skip

_HEX = np.zeros(256, np.int64)
for _i, _c in enumerate("0123456789abcdef"):
    _HEX[ord(_c)] = _i
_POW16 = 16 ** np.arange(15, -1, -1, dtype=np.int64)
_TYPE_NAMES = pa.array([n for n, _ in DATATYPES])
_TYPE_SIZES = np.array([s for _, s in DATATYPES], np.int64)


def hex_to_int64(arr: pa.Array) -> pa.Array:
    """Hex strings of 1–15 lower-case digits → int64 (vectorised)."""
    n = len(arr)
    if n == 0:
        return pa.array([], pa.int64())
    padded = pc.utf8_lpad(arr, 16, "0")
    offsets = np.frombuffer(padded.buffers()[1], np.int32)[padded.offset : padded.offset + 1]
    data = np.frombuffer(padded.buffers()[2], np.uint8)[offsets[0] : offsets[0] + 16 * n]
    return pa.array(_HEX[data].reshape(n, 16) @ _POW16)


def parse_tails(
    tails: pa.Array,
    line_nos: np.ndarray,
    heads: np.ndarray,
    head_cols: dict[str, pa.Array],
) -> tuple[pa.RecordBatch, list[int]]:
    """Rows of nccl_colls for the tails (binary) TAIL matches, and the indices of the others.
    `heads[i]` indexes `head_cols` (proc, dev, nccl_op, op of each distinct line head)."""
    ok = pc.match_substring_regex(tails, TAIL)
    okn = np.asarray(ok)
    bad = np.flatnonzero(~okn).tolist()
    rows = pa.array(np.flatnonzero(okn))
    tokens = pc.split_pattern(tails.filter(ok).cast(pa.large_string()), " ")
    f = {name: pc.list_element(tokens, k).cast(pa.string()) for name, k in TOKENS.items()}
    f["stream"] = pc.utf8_rtrim_whitespace(f["stream"])
    head = pa.array(heads).take(rows)
    count = f["count"].cast(pa.int64())
    datatype = np.asarray(f["dtype"].cast(pa.int32()))
    known = datatype < len(DATATYPES)
    dtype_ix = pa.array(np.where(known, datatype, 0), mask=~known)
    size = pa.array(_TYPE_SIZES[np.where(known, datatype, 0)], mask=~known)
    batch = pa.RecordBatch.from_arrays(
        [
            head_cols["proc"].take(head),
            pa.array(line_nos).take(rows),
            head_cols["dev"].take(head),
            f["comm"],
            hex_to_int64(f["opcount"]),
            head_cols["op"].take(head),
            head_cols["nccl_op"].take(head),
            count,
            pa.array(datatype, pa.int32()),
            _TYPE_NAMES.take(dtype_ix),
            pc.multiply(count, size),
            f["redop"].cast(pa.int32()),
            f["root"].cast(pa.int32()),
            pc.utf8_slice_codeunits(f["nranks"], 8, -1).cast(pa.int32()),
            f["stream"],
        ],
        schema=SCHEMAS["nccl_colls"],
    )
    return batch, bad
