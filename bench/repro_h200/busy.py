"""The busy neighbour of the H200 re-runs: another process keeping the same GPU busy with large bf16 matmuls in a
loop (the seed's "two runs on one GPU" pitfall), until it is killed. `python busy.py [SECONDS]`."""

import sys
import time

import torch

a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
c = torch.empty_like(a)
end = time.time() + (float(sys.argv[1]) if len(sys.argv) > 1 else 3600)
print("busy: started", flush=True)
while time.time() < end:
    for _ in range(50):
        torch.matmul(a, b, out=c)
    torch.cuda.synchronize()
