"""Models of the standard test programs, written here so that torchvision stays optional."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ddp_train.errors import EXIT_DEPENDENCY, EXIT_USAGE, TrainError


class ConvBNReLU(nn.Sequential):
    """conv-BN-ReLU. Sequential's layout (state_dict keys ``0.weight``, ``1.running_mean``, ...) with a forward of
    its own: torch.compile skips frames of torch.nn's own code, so compiling a plain ``nn.Sequential`` in place
    (``module.compile()``, ``--compile-scope blocks``) would compile nothing."""

    def forward(self, x):
        for m in self:
            x = m(x)
        return x


class ToyCNN(nn.Module):
    """A small ConvNet for 32x32x3 inputs (the quick default workload)."""

    def __init__(self, in_channels: int = 3, num_classes: int = 10):
        super().__init__()

        def block(cin, cout):
            return ConvBNReLU(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))

        self.features = nn.Sequential(block(in_channels, 16), nn.MaxPool2d(2), block(16, 32), nn.MaxPool2d(2), block(32, 64))
        self.fc = nn.Linear(64, num_classes)

    def head(self, x):
        return self.fc(x.mean((2, 3)))

    def forward(self, x):
        return self.head(self.features(x))

    def compile_units(self) -> list[str]:
        return ["features.0", "features.2", "features.4", "head"]


class MnistCNN(nn.Module):
    """The classic two-conv MNIST network (conv32-conv64-maxpool-dropout-fc128-dropout-fc10)."""

    def __init__(self, in_channels: int = 1, num_classes: int = 10, image_size: int = 28):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        side = (image_size - 4) // 2
        self.fc1 = nn.Linear(64 * side * side, 128)
        self.fc2 = nn.Linear(128, num_classes)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = self.dropout1(F.max_pool2d(x, 2))
        x = self.dropout2(F.relu(self.fc1(torch.flatten(x, 1))))
        return self.fc2(x)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)), inplace=True)
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x), inplace=True)


class ResNet18Cifar(nn.Module):
    """ResNet-18, CIFAR variant: 3x3 stem with stride 1 and no max-pool (11.2M parameters)."""

    def __init__(self, in_channels: int = 3, num_classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 64, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        layers, cin = [], 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(512, num_classes)

    def stem(self, x):
        return F.relu(self.bn1(self.conv1(x)), inplace=True)

    def head(self, x):
        return self.fc(x.mean((2, 3)))

    def forward(self, x):
        return self.head(self.layers(self.stem(x)))

    def compile_units(self) -> list[str]:
        return ["stem", *(f"layers.{i}" for i in range(len(self.layers))), "head"]


class PyramidBlock(nn.Module):
    """PyramidNet basic block: BN-conv-BN-ReLU-conv-BN, shortcut = avg-pool + zero-padded channels."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.stride = stride
        self.extra = cout - cin

    def forward(self, x):
        out = self.conv1(self.bn1(x))
        out = self.bn3(self.conv2(F.relu(self.bn2(out), inplace=True)))
        sc = F.avg_pool2d(x, 2) if self.stride != 1 else x
        if self.extra:
            sc = F.pad(sc, (0, 0, 0, 0, 0, self.extra))
        return out + sc


class PyramidNet(nn.Module):
    """PyramidNet for CIFAR (Han et al. 2017), basic blocks; default depth 110, alpha 48 (1.7M parameters)."""

    def __init__(self, in_channels: int = 3, num_classes: int = 10, depth: int = 110, alpha: int = 48):
        super().__init__()
        n = (depth - 2) // 6
        add = alpha / (3 * n)
        self.conv1 = nn.Conv2d(in_channels, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        blocks, width, cin = [], 16.0, 16
        for stage in range(3):
            for i in range(n):
                width += add
                cout = int(round(width))
                blocks.append(PyramidBlock(cin, cout, 2 if (stage > 0 and i == 0) else 1))
                cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.bn_final = nn.BatchNorm2d(cin)
        self.fc = nn.Linear(cin, num_classes)

    def stem(self, x):
        return self.bn1(self.conv1(x))

    def head(self, x):
        return self.fc(F.relu(self.bn_final(x), inplace=True).mean((2, 3)))

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)))

    def compile_units(self) -> list[str]:
        return ["stem", *(f"blocks.{i}" for i in range(len(self.blocks))), "head"]


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * self.expansion
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)  # stride on the 3x3 (ResNet v1.5)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)), inplace=True)
        out = F.relu(self.bn2(self.conv2(out)), inplace=True)
        out = self.bn3(self.conv3(out))
        identity = x if self.downsample is None else self.downsample(x)
        return F.relu(out + identity, inplace=True)


class ResNet50(nn.Module):
    """ResNet-50 v1.5 for 224x224 inputs (25.6M parameters, same layout as torchvision's)."""

    def __init__(self, in_channels: int = 3, num_classes: int = 1000):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        layers, cin = [], 64
        for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            stage = []
            for i in range(blocks):
                stage.append(Bottleneck(cin, width, stride if i == 0 else 1))
                cin = width * Bottleneck.expansion
            layers.append(nn.Sequential(*stage))
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.fc = nn.Linear(2048, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        for m in self.modules():
            if isinstance(m, Bottleneck):
                nn.init.zeros_(m.bn3.weight)  # zero-init the last BN of each residual branch

    def stem(self, x):
        return F.max_pool2d(F.relu(self.bn1(self.conv1(x)), inplace=True), 3, 2, 1)

    def head(self, x):
        return self.fc(x.mean((2, 3)))

    def forward(self, x):
        return self.head(self.layer4(self.layer3(self.layer2(self.layer1(self.stem(x))))))

    def compile_units(self) -> list[str]:
        stages = (self.layer1, self.layer2, self.layer3, self.layer4)
        return ["stem", *(f"layer{s + 1}.{i}" for s, st in enumerate(stages) for i in range(len(st))), "head"]


def build_model(name: str, shape: tuple[int, int, int], num_classes: int) -> nn.Module:
    c, h, _ = shape
    if name == "toy-cnn":
        return ToyCNN(c, num_classes)
    if name == "mnist-cnn":
        if h < 6:
            raise TrainError(f"mnist-cnn needs images of at least 6x6, got {h}", EXIT_USAGE)
        return MnistCNN(c, num_classes, h)
    if name == "resnet18":
        return ResNet18Cifar(c, num_classes)
    if name == "pyramidnet":
        return PyramidNet(c, num_classes)
    if name == "resnet50":
        return ResNet50(c, num_classes)
    if name.startswith("torchvision-"):
        try:
            import torchvision  # noqa: F401  (optional, imported only when asked for)
            from torchvision import models as tvm
        except Exception as exc:  # ImportError, or a torchvision built for another torch
            raise TrainError(f"--model {name} needs torchvision, which cannot be imported ({type(exc).__name__}); "
                             f"install a torchvision matching your torch, or use --model {name.split('-', 1)[1]}",
                             EXIT_DEPENDENCY) from None
        m = getattr(tvm, name.split("-", 1)[1])(num_classes=num_classes)
        if c != 3:
            raise TrainError(f"--model {name} takes 3-channel images; use --model resnet18 for {c} channel(s)", EXIT_USAGE)
        return m
    raise TrainError(f"unknown model {name!r}", EXIT_USAGE)


class CpuSyncBatchNorm(nn.BatchNorm2d):
    """SyncBatchNorm for CPU/gloo process groups (torch's SyncBatchNorm is GPU-only).

    Batch statistics are summed over all ranks with an autograd-aware all-reduce, so every rank normalises
    with the global mean/variance and keeps identical running stats.
    """

    def forward(self, x):
        import torch.distributed as dist
        from torch.distributed.nn.functional import all_reduce

        if not self.training or not dist.is_initialized() or dist.get_world_size() == 1:
            return super().forward(x)
        c = x.shape[1]
        xf = x.float()
        count = torch.full((1,), x.numel() / c, dtype=torch.float32, device=x.device)
        packed = torch.cat([xf.sum((0, 2, 3)), (xf * xf).sum((0, 2, 3)), count])
        packed = all_reduce(packed)
        n = packed[-1]
        mean = packed[:c] / n
        var = (packed[c:2 * c] / n - mean * mean).clamp_min(0)
        with torch.no_grad():
            m = self.momentum if self.momentum is not None else 0.1
            self.running_mean.mul_(1 - m).add_(mean.detach(), alpha=m)
            self.running_var.mul_(1 - m).add_(var.detach() * (n / (n - 1).clamp_min(1)), alpha=m)
            self.num_batches_tracked.add_(1)
        shape = (1, c, 1, 1)
        y = (xf - mean.view(shape)) * torch.rsqrt(var.view(shape) + self.eps)
        if self.affine:
            y = y * self.weight.view(shape) + self.bias.view(shape)
        return y.to(x.dtype)


def convert_sync_bn(module: nn.Module, device_type: str) -> nn.Module:
    if device_type == "cuda":
        return nn.SyncBatchNorm.convert_sync_batchnorm(module)
    out = module
    if isinstance(module, nn.BatchNorm2d) and not isinstance(module, CpuSyncBatchNorm):
        out = CpuSyncBatchNorm(module.num_features, module.eps, module.momentum, module.affine,
                               module.track_running_stats)
        out.load_state_dict(module.state_dict())
    for name, child in module.named_children():
        out.add_module(name, convert_sync_bn(child, device_type))
    return out
