# Ported to Tarantella from Horovod's examples/pytorch/pytorch_synthetic_benchmark.py
# (https://github.com/horovod/horovod, Apache License 2.0, Copyright The
# Horovod Authors), following docs/porting.md's Horovod table. Every changed
# line is marked "tarantella:"; the rest follows the original. What has no
# counterpart (hvd.SyncBatchNorm, Adasum, fp16 compression) is refused with
# the reason instead of silently ignored. Added: --image-size (the original
# fixes 224), so that the test suite (python.ported) runs it at 32x32.
import argparse
import torch.backends.cudnn as cudnn
import torch.nn.functional as F
import torch.optim as optim
import torch.utils.data.distributed
from torchvision import models
import tarantella as tnt  # tarantella: was horovod.torch as hvd
import timeit
import numpy as np

# Benchmark settings
parser = argparse.ArgumentParser(description='PyTorch Synthetic Benchmark',
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
parser.add_argument('--fp16-allreduce', action='store_true', default=False,
                    help='use fp16 compression during allreduce')

parser.add_argument('--model', type=str, default='resnet50',
                    help='model to benchmark')
parser.add_argument('--batch-size', type=int, default=32,
                    help='input batch size')
parser.add_argument('--image-size', type=int, default=224,  # tarantella: added
                    help='height and width of the synthetic images')

parser.add_argument('--num-warmup-batches', type=int, default=10,
                    help='number of warm-up batches that don\'t count towards benchmark')
parser.add_argument('--num-batches-per-iter', type=int, default=10,
                    help='number of batches per benchmark iteration')
parser.add_argument('--num-iters', type=int, default=10,
                    help='number of benchmark iterations')

parser.add_argument('--no-cuda', action='store_true', default=False,
                    help='disables CUDA training')

parser.add_argument('--use-adasum', action='store_true', default=False,
                    help='use adasum algorithm to do reduction')

args = parser.parse_args()
args.cuda = not args.no_cuda and torch.cuda.is_available()

# tarantella: no hvd.init(); the import joined the job. Adasum and fp16
# compression have no counterpart (docs/porting.md): refuse them.
if args.use_adasum:
    parser.error('--use-adasum: tarantella has no Adasum (docs/porting.md)')
if args.fp16_allreduce:
    parser.error('--fp16-allreduce: tarantella has no gradient compression yet (docs/porting.md)')

if args.cuda:
    # tarantella: each rank sees only its own GPU (was hvd.local_rank()).
    torch.cuda.set_device(tnt.cuda.local_device())

cudnn.benchmark = True

# Set up standard model.
# tarantella: no hvd.SyncBatchNorm; BatchNorm2d normalises per rank.
model = getattr(models, args.model)()

# The batch below is per rank, as in the original, so the learning rate
# scales with the rank count.
lr_scaler = tnt.get_size()  # tarantella: was hvd.size() (no Adasum case)

if args.cuda:
    # Move model to GPU.
    model.cuda()

optimizer = optim.SGD(model.parameters(), lr=0.01 * lr_scaler)

# tarantella: wrap optimizer with DistributedOptimizer (no compression, op
# or named_parameters).
optimizer = tnt.DistributedOptimizer(optimizer, model)

# tarantella: broadcast parameters; the optimizer state needs no broadcast
# (every rank built the same SGD).
tnt.broadcast_parameters(model, root=0)

# Set up fixed fake data
data = torch.randn(args.batch_size, 3, args.image_size, args.image_size)  # tarantella: size
target = torch.LongTensor(args.batch_size).random_() % 1000
if args.cuda:
    data, target = data.cuda(), target.cuda()


def benchmark_step():
    optimizer.zero_grad()
    output = model(data)
    loss = F.cross_entropy(output, target)
    loss.backward()
    optimizer.step()


def log(s, nl=True):
    if tnt.get_rank() != 0:  # tarantella: was hvd.rank()
        return
    print(s, end='\n' if nl else '')


log('Model: %s' % args.model)
log('Batch size: %d' % args.batch_size)
device = 'GPU' if args.cuda else 'CPU'
log('Number of %ss: %d' % (device, tnt.get_size()))  # tarantella: was hvd.size()

# Warm-up
log('Running warmup...')
timeit.timeit(benchmark_step, number=args.num_warmup_batches)

# Benchmark
log('Running benchmark...')
img_secs = []
for x in range(args.num_iters):
    time = timeit.timeit(benchmark_step, number=args.num_batches_per_iter)
    img_sec = args.batch_size * args.num_batches_per_iter / time
    log('Iter #%d: %.1f img/sec per %s' % (x, img_sec, device))
    img_secs.append(img_sec)

# Results
img_sec_mean = np.mean(img_secs)
img_sec_conf = 1.96 * np.std(img_secs)
log('Img/sec per %s: %.1f +-%.1f' % (device, img_sec_mean, img_sec_conf))
log('Total img/sec on %d %s(s): %.1f +-%.1f' %  # tarantella: hvd.size() -> tnt.get_size()
    (tnt.get_size(), device, tnt.get_size() * img_sec_mean, tnt.get_size() * img_sec_conf))
