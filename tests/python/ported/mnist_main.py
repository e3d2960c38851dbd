# Ported to Tarantella from pytorch/examples' mnist/main.py
# (https://github.com/pytorch/examples, BSD 3-Clause License, Copyright (c)
# 2017, the pytorch/examples contributors), following docs/porting.md. Every
# changed line is marked "tarantella:"; the rest follows the original.
# MNIST is swapped for scikit-learn's digits (shipped with the package, no
# download), upsampled from 8x8 to MNIST's 28x28 so that Net is unchanged.
# The test suite (python.ported) runs it on 1 and 2 ranks.
from __future__ import print_function
import argparse
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from sklearn.datasets import load_digits  # tarantella: the data set swap
from torchvision import transforms
from torch.optim.lr_scheduler import StepLR
import tarantella as tnt  # tarantella: joins the job


class Digits(torch.utils.data.Dataset):
    """tarantella: sklearn's digits in MNIST's place: 1437 training and 360
    test images, scaled to [0, 1] and upsampled to 28x28."""

    def __init__(self, train, transform):
        d = load_digits()
        part = slice(0, 1437) if train else slice(1437, None)
        x = torch.tensor(d.images[part] / 16.0, dtype=torch.float32).unsqueeze(1)
        self.x = F.interpolate(x, size=28, mode='bilinear', align_corners=False)
        self.y = torch.tensor(d.target[part])
        self.transform = transform

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.transform(self.x[i]), self.y[i]


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = self.conv1(x)
        x = F.relu(x)
        x = self.conv2(x)
        x = F.relu(x)
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = self.fc1(x)
        x = F.relu(x)
        x = self.dropout2(x)
        x = self.fc2(x)
        output = F.log_softmax(x, dim=1)
        return output


def train(args, model, device, train_loader, optimizer, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        # tarantella: weight this rank's share, so the step is the serial one
        optimizer.set_micro_batch(*train_loader.micro_batch(batch_idx))
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        if batch_idx % args.log_interval == 0:
            print('Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'.format(
                epoch, batch_idx * len(data), len(train_loader.dataset),
                100. * batch_idx / len(train_loader), loss.item()))
            if args.dry_run:
                break


def test(model, device, test_loader):
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction='sum').item()  # sum up batch loss
            pred = output.argmax(dim=1, keepdim=True)  # get the index of the max log-probability
            correct += pred.eq(target.view_as(pred)).sum().item()

    test_loss /= len(test_loader.dataset)

    print('\nTest set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)\n'.format(
        test_loss, correct, len(test_loader.dataset),
        100. * correct / len(test_loader.dataset)))


def main():
    # Training settings
    parser = argparse.ArgumentParser(description='PyTorch MNIST Example')
    parser.add_argument('--batch-size', type=int, default=64, metavar='N',
                        help='input batch size for training (default: 64)')
    parser.add_argument('--test-batch-size', type=int, default=1000, metavar='N',
                        help='input batch size for testing (default: 1000)')
    parser.add_argument('--epochs', type=int, default=14, metavar='N',
                        help='number of epochs to train (default: 14)')
    parser.add_argument('--lr', type=float, default=1.0, metavar='LR',
                        help='learning rate (default: 1.0)')
    parser.add_argument('--gamma', type=float, default=0.7, metavar='M',
                        help='Learning rate step gamma (default: 0.7)')
    parser.add_argument('--no-cuda', action='store_true', default=False,
                        help='disables CUDA training')
    parser.add_argument('--dry-run', action='store_true', default=False,
                        help='quickly check a single pass')
    parser.add_argument('--seed', type=int, default=1, metavar='S',
                        help='random seed (default: 1)')
    parser.add_argument('--log-interval', type=int, default=10, metavar='N',
                        help='how many batches to wait before logging training status')
    parser.add_argument('--save-model', action='store_true', default=False,
                        help='For Saving the current Model')
    args = parser.parse_args()
    use_cuda = not args.no_cuda and torch.cuda.is_available()

    # tarantella: seed + rank, so ranks draw different dropout masks
    tnt.seed_per_rank(args.seed)

    # tarantella: this rank's GPU (was torch.device("cuda"))
    device = tnt.cuda.local_device() if use_cuda else torch.device("cpu")

    train_kwargs = {'batch_size': args.batch_size}  # the global batch under tarantella
    test_kwargs = {'batch_size': args.test_batch_size}
    if use_cuda:
        cuda_kwargs = {'num_workers': 1,
                       'pin_memory': True,
                       'shuffle': True}
        train_kwargs.update(cuda_kwargs)
        test_kwargs.update(cuda_kwargs)

    transform = transforms.Compose([  # tarantella: the tensors need no ToTensor
        transforms.Normalize((0.1307,), (0.3081,))
        ])
    dataset1 = Digits(train=True, transform=transform)  # tarantella: was MNIST
    dataset2 = Digits(train=False, transform=transform)
    # tarantella: each rank loads its share of every global batch
    train_loader = tnt.data.DataLoader(dataset1, **train_kwargs)
    test_loader = torch.utils.data.DataLoader(dataset2, **test_kwargs)

    model = Net().to(device)
    tnt.broadcast_parameters(model)  # tarantella: the master's initial weights
    # tarantella: gradients averaged over the ranks
    optimizer = tnt.DistributedOptimizer(optim.Adadelta(model.parameters(), lr=args.lr), model)

    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
    for epoch in range(1, args.epochs + 1):
        train(args, model, device, train_loader, optimizer, epoch)
        test(model, device, test_loader)
        scheduler.step()

    if args.save_model and tnt.is_master_rank():  # tarantella: one writer
        torch.save(model.state_dict(), "mnist_cnn.pt")


if __name__ == '__main__':
    main()
