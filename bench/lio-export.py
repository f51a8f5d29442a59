#!/usr/bin/python3
# nbdrepl: export a file or a block device as LUN 0 of an iSCSI target
# of the kernel's LIO, with rtslib-fb (the library targetcli drives; one
# Python start instead of one per targetcli command, which under TCG
# takes half a minute each).  Used by scripts/bench-vm in the guest.
# Copyright (C) 2026 the nbdrepl authors.  BSD-3-Clause, see COPYING.
#
#   lio-export.py export PATH IQN PORT   fileio backstore for a file,
#                                        block (iblock) for /dev/...;
#                                        portal 127.0.0.1:PORT, no
#                                        authentication, any initiator
#   lio-export.py clear                  remove every LIO object
import os
import sys

from rtslib_fb import (BlockStorageObject, FabricModule, FileIOStorageObject,
                       LUN, NetworkPortal, RTSRoot, Target, TPG)


def export(path, iqn, port):
    if path.startswith("/dev/"):
        so = BlockStorageObject("bench_b", dev=path)
    else:
        so = FileIOStorageObject("bench_f", path, size=os.path.getsize(path))
    tpg = TPG(Target(FabricModule("iscsi"), iqn), 1)
    LUN(tpg, 0, so)
    NetworkPortal(tpg, "127.0.0.1", port)
    for name, value in (("authentication", "0"),
                        ("demo_mode_write_protect", "0"),
                        ("generate_node_acls", "1"),
                        ("cache_dynamic_acls", "1")):
        tpg.set_attribute(name, value)
    tpg.enable = True
    print("%s: %s backstore, iscsi://127.0.0.1:%d/%s/0"
          % (path, so.plugin, port, iqn))


def main(argv):
    if len(argv) == 5 and argv[1] == "export":
        export(argv[2], argv[3], int(argv[4]))
    elif len(argv) == 2 and argv[1] == "clear":
        RTSRoot().clear_existing(confirm=True)
    else:
        sys.exit("usage: lio-export.py export PATH IQN PORT | clear")


if __name__ == "__main__":
    main(sys.argv)
