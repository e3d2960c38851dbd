#!/usr/bin/env python3
"""Writes the seed corpora of the C fuzz harnesses (tests/fuzz/corpus/<name>/):
a handful of valid inputs and edge cases each, in the input layout that the
harness's header comment describes. Rerun it after changing a layout, a
settings table row or the cookie in fuzz_check.h, and commit the result;
the backup corpus comes from fuzz_backup.py --write-corpus (it needs the
real writer).

    make_corpus.py [CORPUS_DIR]    (default: tests/fuzz/corpus next to this file)
"""
import os
import re
import shutil
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# fuzz_check.h's FUZZ_COOKIE_0/1: valid messages carry it so that the
# fuzzer starts past the 128-bit cookie compare.
COOKIE = (0x0123456789abcdef, 0xfedcba9876543210)
SEQ_WIREUP, SEQ_GOODBYE, SEQ_SIDE = 0xFFFFFD, 0xFFFFFE, 0xFFFFFF   # ucx_ctl.h
DOCTOR_MAGIC = 0x54444f43                                            # doctor.h
UINT32_MAX = 0xFFFFFFFF
# coll/verdict.h's INFO_* bits that the corpus sets: inside a collective,
# and paused (the flag a forged board would use to stall every verdict).
INFO_IN, INFO_PAUSED = 0x1, 0x2


def ctl_header(rank, seq, cookie=COOKIE):
    """struct tnt_ucx_ctl_header: two u64, i32 rank, u32 seq (24 bytes)."""
    return struct.pack("<QQiI", cookie[0], cookie[1], rank, seq)


def board(entries, magic=DOCTOR_MAGIC, count=None):
    """struct tnt_doctor_msg cut after its entries: u32 magic, u32 count,
    then (i32 rank, u32 beat_age_ms, u64 seq, u64 info) per entry."""
    out = struct.pack("<II", magic, len(entries) if count is None else count)
    for rank, beat, seq, info in entries:
        out += struct.pack("<iIQQ", rank, beat, seq, info)
    return out


def settings_names():
    """The table's variable names in table order: the harness picks one by
    index (its first byte)."""
    with open(os.path.join(ROOT, "libtnt", "src", "util", "settings.c")) as f:
        return re.findall(r'^\s*\{ "(TNT_[A-Z0-9_]+)"', f.read(), re.M)


def settings_corpus():
    names = settings_names()
    if len(names) < 20:
        sys.exit("make_corpus: found only %d settings in settings.c" % len(names))

    def one(name, value):
        index = names.index(name) if name in names else len(names)
        return bytes([index]) + value.encode()
    return {
        "timeout_seconds": one("TNT_TIMEOUT", "30s"),
        "timeout_fraction_exp": one("TNT_TIMEOUT", " 1.5e2 s"),
        "timeout_negative": one("TNT_TIMEOUT", "-1"),
        "timeout_nan": one("TNT_TIMEOUT", "nan"),
        "stall_warn_hex": one("TNT_STALL_WARN", "0x1p4"),
        "log_level_choice": one("TNT_LOG_LEVEL", "DEBUG"),
        "log_all_bool": one("TNT_LOG_ON_ALL_DEVICES", "yes"),
        "fusion_max": one("TNT_FUSION_THRESHOLD_KB", "4194304"),
        "fusion_wraps": one("TNT_FUSION_THRESHOLD_KB", "18014398509481984"),
        "staging_minus_one": one("TNT_SHM_STAGING_KB", "-1"),
        "stream_kb_top": one("TNT_SHM_STREAM_KB", "1073741824"),
        "algo_ring": one("TNT_ALLREDUCE_ALGO", "ring"),
        "latency_digits": one("TNT_MULTINODE_LATENCY_NS", "000000000000000000000000000000001"),
        "tcp_seg_empty": one("TNT_UCX_TCP_SEG_KB", ""),
        "gpu_bad": one("TNT_GPU_TRANSPORT", "nccl2"),
        "unknown_name": one("TNT_NOT_A_SETTING", "1"),
    }


def spank_corpus():
    # First byte: 0 --tarantella, 1 plugstack.conf arguments, 2 the
    # allocation's option, a newline, the step's option.
    return {
        "args_all": b"\x00pin=core,pin-memory,fusion=64,log=debug,log-all,output-all,no-gpu,verbose",
        "args_bare_null": b"\x00(null)",
        "args_commas_spaces": b"\x00 , pin = socket ,, VERBOSE=no,",
        "args_help": b"\x00help",
        "args_bad_fusion": b"\x00fusion=99999999999999999999",
        "args_no_name": b"\x00=core",
        "args_too_long": b"\x00" + b"verbose," * 140,
        "plugstack_defaults": b"\x01default_pin=numa default_fusion=16384 default_log_all",
        "plugstack_port_range": b"\x01master_port_range=1024-65535",
        "plugstack_bad_range": b"\x01master_port_range=2000-1999",
        "plugstack_help": b"\x01default_help",
        "resolve_override": b"\x02pin=socket,verbose\nverbose=no,fusion=0",
        "resolve_inherited_help": b"\x02help\n",
        "resolve_bad_own": b"\x02pin=core\npin=",
    }


def ucx_corpus():
    # kind (0 hello, 1 goodbye, 2 side), size - 1 (u16), my rank (u16), the
    # tag's sender (3 bytes), the message.
    def one(kind, size, me, sender, msg):
        return struct.pack("<BHH", kind, size - 1, me) + sender.to_bytes(3, "little") + msg
    hello = ctl_header(1, SEQ_WIREUP)
    return {
        "hello_valid": one(0, 4, 0, 1, hello),
        "hello_long": one(0, 4, 0, 1, hello + b"\0"),
        "hello_wrong_cookie": one(0, 4, 0, 1, ctl_header(1, SEQ_WIREUP, (1, 2))),
        "hello_rank_mismatch": one(0, 4, 0, 1, ctl_header(2, SEQ_WIREUP)),
        "hello_from_self": one(0, 4, 1, 1, ctl_header(1, SEQ_WIREUP)),
        "hello_sender_beyond": one(0, 4, 0, 9, ctl_header(9, SEQ_WIREUP)),
        "goodbye_valid": one(1, 2, 1, 0, ctl_header(0, SEQ_GOODBYE)),
        "goodbye_as_hello": one(0, 2, 1, 0, ctl_header(0, SEQ_GOODBYE)),
        "goodbye_short": one(1, 2, 1, 0, ctl_header(0, SEQ_GOODBYE)[:20]),
        "side_valid": one(2, 8, 0, 4, ctl_header(4, SEQ_SIDE) + board([(4, 10, 7, INFO_IN)])),
        "side_oversize": one(2, 8, 0, 4, ctl_header(4, SEQ_SIDE) + b"\0" * 8193),
        "empty": one(2, 1, 0, 0, b""),
    }


def doctor_corpus():
    # size - 1 (u16), ranks per node - 1 (u8), my rank (u16), the tag's
    # sender (3 bytes), then the side message.
    def one(size, per_node, me, sender, payload, header_rank=None):
        rank = sender if header_rank is None else header_rank
        return (struct.pack("<HBH", size - 1, per_node - 1, me) + sender.to_bytes(3, "little")
                + ctl_header(rank, SEQ_SIDE) + payload)
    # 8 ranks on 4 nodes of 2; I am rank 0 (node 0), the sender rank 2 (node 1).
    node1 = [(2, 5, 41, INFO_IN), (3, UINT32_MAX, 40, 0)]
    return {
        "board_valid": one(8, 2, 0, 2, board(node1)),
        "board_empty": one(8, 2, 0, 2, board([])),
        "board_overreach_paused": one(8, 2, 0, 2, board(node1 + [(5, 1, 41, INFO_IN | INFO_PAUSED)])),
        "board_on_my_node": one(8, 2, 0, 2, board([(1, 3, 41, INFO_IN)])),
        "board_rank_out_of_range": one(8, 2, 0, 2, board([(8, 3, 41, 0), (-1, 3, 41, 0)])),
        "board_count_beyond_bytes": one(8, 2, 0, 2, board(node1, count=3)),
        "board_count_huge": one(8, 2, 0, 2, board(node1, count=0x10000000)),
        "board_bad_magic": one(8, 2, 0, 2, board(node1, magic=0x434f4454)),
        "board_short": one(8, 2, 0, 2, board(node1)[:6]),
        "board_full": one(256, 128, 0, 128,
                          board([(128 + i, i, 9, INFO_IN) for i in range(128)])),
        "board_sender_beyond": one(8, 2, 0, 9, board(node1)),
        "board_wrong_cookie": (struct.pack("<HBH", 7, 1, 0) + (2).to_bytes(3, "little")
                               + ctl_header(2, SEQ_SIDE, (0, 0)) + board(node1)),
    }


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "corpus")
    for name, corpus in (("settings", settings_corpus()), ("spank_args", spank_corpus()),
                         ("ucx_ctl", ucx_corpus()), ("doctor_msg", doctor_corpus())):
        d = os.path.join(out, name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        for fname, data in sorted(corpus.items()):
            with open(os.path.join(d, fname), "wb") as f:
                f.write(data)
        print("make_corpus: %s: %d inputs" % (d, len(corpus)))


if __name__ == "__main__":
    main()
