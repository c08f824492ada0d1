// The conv layers of ResNet-18/50, MobileNetV2, ShuffleNetV2 and VGG-16 (batch 1, 224x224)
// from perf/networks.csv: one reader for the benchmark and the tests.
#pragma once
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gemmkit.h"

namespace gkbench {

struct NetworkLayer {
  std::string net, layer;
  gk_conv_desc d;  // padding symmetric, no activation
  int count;       // how often the layer occurs in its network
};

// Rows of net,layer,N,C,H,W,K,R,S,stride,pad,dilation,groups,count; malformed rows skipped.
inline std::vector<NetworkLayer> read_network_layers(const std::string& path) {
  std::ifstream csv(path);
  std::vector<NetworkLayer> layers;
  std::string line;
  std::getline(csv, line);  // header
  while (std::getline(csv, line)) {
    std::stringstream ss(line);
    NetworkLayer l;
    std::string field;
    std::getline(ss, l.net, ',');
    std::getline(ss, l.layer, ',');
    std::vector<int64_t> v;
    while (std::getline(ss, field, ',')) v.push_back(std::stoll(field));
    if (v.size() != 12) continue;
    gk_conv_desc& d = l.d;
    gk_conv_desc_init(&d);
    d.batch = v[0], d.in_channels = v[1], d.in_height = v[2], d.in_width = v[3], d.out_channels = v[4];
    d.kernel_h = v[5], d.kernel_w = v[6], d.stride_h = d.stride_w = v[7];
    d.pad_top = d.pad_bottom = d.pad_left = d.pad_right = v[8];
    d.dilation_h = d.dilation_w = v[9], d.groups = v[10];
    l.count = static_cast<int>(v[11]);
    layers.push_back(l);
  }
  return layers;
}

}  // namespace gkbench
