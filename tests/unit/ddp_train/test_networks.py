"""ddp_train.model.networks: the models' shapes and sizes; a torchvision model without torchvision exits 6."""

from __future__ import annotations

import torch

from ddp_train.__main__ import main
from ddp_train.errors import EXIT_DEPENDENCY
from ddp_train.model.networks import PyramidNet, ResNet18Cifar, ResNet50, build_model

TINY = ["--workload", "toy", "--train-size", "128", "--test-size", "64", "--batch-size", "32", "--epochs", "1",
        "--strategy", "single", "--quiet"]


def test_models_shapes_and_sizes():
    assert sum(p.numel() for p in ResNet18Cifar().parameters()) == 11_173_962
    assert sum(p.numel() for p in ResNet50().parameters()) == 25_557_032  # same as torchvision's resnet50
    assert 1.6e6 < sum(p.numel() for p in PyramidNet().parameters()) < 1.8e6
    with torch.no_grad():
        for name, shape in (("toy-cnn", (3, 32, 32)), ("mnist-cnn", (1, 28, 28)), ("resnet18", (3, 32, 32)),
                            ("pyramidnet", (3, 32, 32)), ("resnet50", (3, 64, 64))):
            m = build_model(name, shape, 10).eval()
            assert m(torch.zeros(2, *shape)).shape == (2, 10)


def test_torchvision_model_without_torchvision_exits_6(monkeypatch, capsys):
    monkeypatch.setitem(__import__("sys").modules, "torchvision", None)
    assert main(TINY + ["--model", "torchvision-resnet18"]) == EXIT_DEPENDENCY
    assert "needs torchvision" in capsys.readouterr().err
