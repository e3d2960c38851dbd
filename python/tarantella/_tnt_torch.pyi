# Stubs for the private C++ extension tarantella._tnt_torch (the "tnt"
# torch.distributed backend; built only where torch's C++ headers were found).
from datetime import timedelta

import torch.distributed as dist

class ProcessGroupTnt(dist.ProcessGroup):
    @property
    def comm_name(self) -> str: ...

def create_process_group(store: dist.Store, rank: int, size: int,
                         timeout: timedelta) -> ProcessGroupTnt: ...
