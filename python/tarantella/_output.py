"""Where tnt.Model prints: the master rank, or every rank with a prefix when
TNT_OUTPUT_ON_ALL_DEVICES is set."""
import os

from ._comm import rank as _rank, size as _size


def output_on_all_devices():
    value = os.environ.get("TNT_OUTPUT_ON_ALL_DEVICES", "")
    return value.strip().lower() not in ("", "0", "false", "no", "off")


def is_output_rank():
    return _rank() == 0 or output_on_all_devices()


def out(msg):
    """Prints on the output ranks (master, or all with a rank prefix)."""
    if _rank() == 0 and not output_on_all_devices():
        print(msg, flush=True)
    elif output_on_all_devices():
        print("[%d] %s" % (_rank(), msg) if _size() > 1 else msg, flush=True)
