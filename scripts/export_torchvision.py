#!/usr/bin/python3
"""Exports a torchvision network to gemmkit's model file (the format is described in
net/model.h) for build/bin/gk-infer.

    scripts/export_torchvision.py NET OUT_FILE [--state-dict FILE.pt] [--seed N] [--size S]

NET: resnet18, resnet50, mobilenet_v2, shufflenet_v2_x1_0, vgg16. Batch norms are folded
into the convolutions (in float64). Without --state-dict the weights are random (torchvision's
initialization with the seed: no pretrained weights can be downloaded here), and the batch
norms get non-trivial statistics, so that a folding mistake cannot hide behind mean 0,
variance 1: their running mean and variance are measured on a random batch, and their scale
and shift drawn at random.
"""
import argparse
import sys

import torch
import torchvision

NETWORKS = ("resnet18", "resnet50", "mobilenet_v2", "shufflenet_v2_x1_0", "vgg16")


def build_model(name, seed=0, state_dict=None, size=224):
    """The torchvision model in eval mode, with the weights the export and the check use."""
    if name not in NETWORKS:
        raise SystemExit(f"export: unknown network {name!r} (one of {', '.join(NETWORKS)})")
    torch.manual_seed(seed)
    model = getattr(torchvision.models, name)(weights=None)
    if state_dict:
        model.load_state_dict(torch.load(state_dict, map_location="cpu"))
    else:
        randomize_batch_norms(model, seed, size)
    return model.eval()


def randomize_batch_norms(model, seed, size):
    generator = torch.Generator().manual_seed(seed + 1)
    bns = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    for bn in bns:
        bn.momentum = None  # cumulative: one batch sets the running statistics to its own
        bn.reset_running_stats()
    model.train()
    with torch.no_grad():
        model(torch.rand(4, 3, size, size, generator=generator))
        for bn in bns:
            c = bn.num_features
            bn.weight.copy_(0.5 + torch.rand(c, generator=generator))
            bn.bias.copy_(0.2 * torch.randn(c, generator=generator))
            bn.running_mean.add_(0.1 * torch.randn(c, generator=generator))
            bn.running_var.mul_(0.75 + 0.5 * torch.rand(c, generator=generator))
    model.eval()


def pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


class Writer:
    """Builds the model file: op lines, float data, and each tensor's shape (C, H, W)."""

    def __init__(self, name, size):
        self.parts = [b"gknet 1\n", f"name {name}\n".encode(), f"input 3 {size} {size}\n".encode()]
        self.shapes = [(3, size, size)]

    def _line(self, text, outputs):
        ids = list(range(len(self.shapes), len(self.shapes) + len(outputs)))
        self.shapes += outputs
        self.parts.append(f"{text} out={','.join(map(str, ids))}\n".encode())
        return ids if len(ids) > 1 else ids[0]

    def _floats(self, tensor):
        self.parts.append(tensor.detach().to(torch.float32).contiguous().numpy().astype("<f4").tobytes())

    def conv(self, x, conv, bn=None, act="none", add=None):
        w = conv.weight.detach().to(torch.float64)
        b = conv.bias.detach().to(torch.float64) if conv.bias is not None else torch.zeros(w.shape[0], dtype=torch.float64)
        if bn is not None:  # y = gamma (x - mean) / sqrt(var + eps) + beta
            scale = bn.weight.double() / torch.sqrt(bn.running_var.double() + bn.eps)
            w = w * scale.view(-1, 1, 1, 1)
            b = (b - bn.running_mean.double()) * scale + bn.bias.double()
        (kh, kw), (sh, sw), (ph, pw), (dh, dw) = (pair(conv.kernel_size), pair(conv.stride), pair(conv.padding),
                                                  pair(conv.dilation))
        c, h, wd = self.shapes[x]
        oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
        ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
        extra = f" add={add}" if add is not None else ""
        y = self._line(f"conv in={x} oc={w.shape[0]} kh={kh} kw={kw} sh={sh} sw={sw} pt={ph} pl={pw} pb={ph} pr={pw}"
                       f" dh={dh} dw={dw} groups={conv.groups} act={act} bias=1{extra}", [(w.shape[0], oh, ow)])
        self._floats(w)
        self._floats(b)
        return y

    def pool(self, x, kind, kernel, stride, padding, ceil_mode=False, count_include_pad=True):
        (kh, kw), (sh, sw), (ph, pw) = pair(kernel), pair(stride), pair(padding)
        c, h, w = self.shapes[x]

        def out(n, k, s, p):
            o = -(-(n + 2 * p - k) // s) + 1 if ceil_mode else (n + 2 * p - k) // s + 1
            return o - 1 if ceil_mode and (o - 1) * s >= n + p else o

        extra = f" count_pad={int(count_include_pad)}" if kind == "avgpool" else ""
        return self._line(f"{kind} in={x} kh={kh} kw={kw} sh={sh} sw={sw} pt={ph} pl={pw} pb={ph} pr={pw}"
                          f" ceil={int(bool(ceil_mode))}{extra}", [(c, out(h, kh, sh, ph), out(w, kw, sw, pw))])

    def adaptive_avgpool(self, x, size):
        c, h, w = self.shapes[x]
        oh, ow = pair(size)
        if (h, w) == (oh, ow):
            return x
        if (oh, ow) == (1, 1):
            return self._line(f"gap in={x}", [(c, 1, 1)])
        if h % oh or w % ow:
            raise SystemExit(f"export: adaptive pooling {h}x{w} -> {oh}x{ow} is not a plain pooling")
        return self.pool(x, "avgpool", (h // oh, w // ow), (h // oh, w // ow), 0)

    def add(self, a, b, act="none"):
        return self._line(f"add in={a},{b} act={act}", [self.shapes[a]])

    def concat(self, xs):
        c = sum(self.shapes[x][0] for x in xs)
        return self._line(f"concat in={','.join(map(str, xs))}", [(c,) + self.shapes[xs[0]][1:]])

    def split(self, x, channels):
        _, h, w = self.shapes[x]
        return self._line(f"split in={x} channels={','.join(map(str, channels))}", [(c, h, w) for c in channels])

    def shuffle(self, x, groups):
        return self._line(f"shuffle in={x} groups={groups}", [self.shapes[x]])

    def flatten(self, x):
        c, h, w = self.shapes[x]
        return self._line(f"flatten in={x}", [(c * h * w, 1, 1)])

    def fc(self, x, linear, act="none"):
        y = self._line(f"fc in={x} features={linear.out_features} act={act} bias={int(linear.bias is not None)}",
                       [(linear.out_features, 1, 1)])
        self._floats(linear.weight)
        if linear.bias is not None:
            self._floats(linear.bias)
        return y

    def finish(self, output):
        self.parts.append(f"output {output}\nend\n".encode())
        return b"".join(self.parts)


def leaves(module):
    """The layers of nested Sequentials, in order."""
    if isinstance(module, torch.nn.Sequential):
        for m in module:
            yield from leaves(m)
    else:
        yield module


def activation_of(layer):
    if isinstance(layer, torch.nn.ReLU6):
        return "relu6"
    if isinstance(layer, torch.nn.ReLU):
        return "relu"
    return None


def sequence(w, x, module, add=None, add_act=None):
    """Conv [BN] [ReLU|ReLU6] runs, poolings, linears; `add` joins the last conv (residual)
    with `add_act` applied after the join."""
    layers = [m for m in leaves(module) if not isinstance(m, (torch.nn.Dropout, torch.nn.Identity))]
    i = 0
    while i < len(layers):
        m = layers[i]
        if isinstance(m, torch.nn.Conv2d):
            bn = layers[i + 1] if i + 1 < len(layers) and isinstance(layers[i + 1], torch.nn.BatchNorm2d) else None
            j = i + 1 + (bn is not None)
            act = activation_of(layers[j]) if j < len(layers) else None
            j += act is not None
            last = not any(isinstance(l, torch.nn.Conv2d) for l in layers[j:])
            if add is not None and last:
                if act is not None:
                    raise SystemExit("export: an activation before a residual join")
                x = w.conv(x, m, bn, add_act or "none", add=add)
            else:
                x = w.conv(x, m, bn, act or "none")
            i = j
        elif isinstance(m, torch.nn.MaxPool2d):
            x = w.pool(x, "maxpool", m.kernel_size, m.stride, m.padding, m.ceil_mode)
            i += 1
        elif isinstance(m, torch.nn.AdaptiveAvgPool2d):
            x = w.adaptive_avgpool(x, m.output_size)
            i += 1
        elif isinstance(m, torch.nn.Linear):
            act = activation_of(layers[i + 1]) if i + 1 < len(layers) else None
            x = w.fc(x, m, act or "none")
            i += 1 + (act is not None)
        else:
            raise SystemExit(f"export: no rule for {type(m).__name__}")
    return x


def resnet(w, model):
    x = sequence(w, 0, torch.nn.Sequential(model.conv1, model.bn1, model.relu, model.maxpool))
    for layer in (model.layer1, model.layer2, model.layer3, model.layer4):
        for block in layer:
            shortcut = sequence(w, x, block.downsample) if block.downsample is not None else x
            if isinstance(block, torchvision.models.resnet.Bottleneck):
                body = [block.conv1, block.bn1, block.relu, block.conv2, block.bn2, block.relu, block.conv3, block.bn3]
            else:
                body = [block.conv1, block.bn1, block.relu, block.conv2, block.bn2]
            x = sequence(w, x, torch.nn.Sequential(*body), add=shortcut, add_act="relu")
    x = w.adaptive_avgpool(x, model.avgpool.output_size)
    return w.fc(w.flatten(x), model.fc)


def mobilenet_v2(w, model):
    x = 0
    for block in model.features:
        if isinstance(block, torchvision.models.mobilenetv2.InvertedResidual):
            x = sequence(w, x, block.conv, add=x if block.use_res_connect else None)
        else:
            x = sequence(w, x, block)
    x = w.adaptive_avgpool(x, 1)
    return sequence(w, w.flatten(x), model.classifier)


def shufflenet_v2(w, model):
    x = sequence(w, 0, torch.nn.Sequential(model.conv1, model.maxpool))
    for stage in (model.stage2, model.stage3, model.stage4):
        for block in stage:
            if block.stride == 1:
                half = w.shapes[x][0] // 2
                x1, x2 = w.split(x, [half, half])
                x = w.concat([x1, sequence(w, x2, block.branch2)])
            else:
                x = w.concat([sequence(w, x, block.branch1), sequence(w, x, block.branch2)])
            x = w.shuffle(x, 2)
    x = sequence(w, x, model.conv5)
    x = w.adaptive_avgpool(x, 1)  # torch.mean over H and W
    return w.fc(w.flatten(x), model.fc)


def vgg(w, model):
    x = sequence(w, 0, model.features)
    x = w.adaptive_avgpool(x, model.avgpool.output_size)
    return sequence(w, w.flatten(x), model.classifier)


def export(name, model, size=224):
    """The model file's bytes."""
    w = Writer(name, size)
    walk = {"resnet18": resnet, "resnet50": resnet, "mobilenet_v2": mobilenet_v2,
            "shufflenet_v2_x1_0": shufflenet_v2, "vgg16": vgg}[name]
    with torch.no_grad():
        return w.finish(walk(w, model))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("net", choices=NETWORKS)
    p.add_argument("out")
    p.add_argument("--state-dict", help="weights saved with torch.save(model.state_dict(), FILE)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--size", type=int, default=224, help="input height and width")
    a = p.parse_args()
    model = build_model(a.net, a.seed, a.state_dict, a.size)
    data = export(a.net, model, a.size)
    with open(a.out, "wb") as f:
        f.write(data)
    print(f"{a.out}: {a.net}, {len(data) / 1e6:.1f} MB")


if __name__ == "__main__":
    sys.exit(main())
