#include "storage/oci_image.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdio>
#include <set>

#include <nlohmann/json.hpp>

#include "storage/context_tar.h"
#include "storage/digest.h"

namespace space::storage {
namespace {

struct M {
  std::string name;
  char type = '0';
  std::string data;
  std::string link;
  unsigned uid = 0;
};

std::string Tar(const std::vector<M>& members) {
  std::string out;
  for (const auto& m : members) {
    const std::string h = UstarHeader(m.name, m.type, m.type == '5' ? 0755 : 0644, m.uid, m.uid, m.data.size(), m.link);
    std::string d = m.data;
    d.resize((d.size() + 511) / 512 * 512, '\0');
    out += h + d;
  }
  return out + std::string(1024, '\0');
}

std::string Gzip(const std::string& in) {
  z_stream z{};
  deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, in.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

const std::string kConfig = R"({"config": {"Env": ["PATH=/bin", "A=1"], "WorkingDir": "/srv", "User": "1000",
                                 "Entrypoint": ["/bin/sh"], "Cmd": ["-c", "serve"]}})";

std::string DockerSave(const std::vector<std::string>& layers) {
  std::vector<M> files = {{"c.json", '0', kConfig}};
  nlohmann::json paths = nlohmann::json::array();
  for (size_t i = 0; i < layers.size(); ++i) {
    files.push_back({"l" + std::to_string(i) + "/layer.tar", '0', layers[i]});
    paths.push_back("l" + std::to_string(i) + "/layer.tar");
  }
  files.push_back({"manifest.json", '0', nlohmann::json::array({{{"Config", "c.json"}, {"Layers", paths}}}).dump()});
  return Tar(files);
}

std::string Hex(const std::string& data) { return Sha256Hex(data).substr(7); }

std::string OciLayout(const std::vector<std::string>& layers, bool corrupt_blob = false) {
  std::vector<M> files = {{"oci-layout", '0', R"({"imageLayoutVersion": "1.0.0"})"},
                          {"blobs/sha256/" + Hex(kConfig), '0', kConfig}};
  nlohmann::json ls = nlohmann::json::array();
  for (const auto& l : layers) {
    files.push_back({"blobs/sha256/" + Hex(l), '0', corrupt_blob ? l + "x" : l});
    ls.push_back({{"mediaType", "application/vnd.oci.image.layer.v1.tar+gzip"}, {"digest", Sha256Hex(l)}});
  }
  std::string manifest =
      nlohmann::json{{"schemaVersion", 2}, {"config", {{"digest", Sha256Hex(kConfig)}}}, {"layers", ls}}.dump();
  files.push_back({"blobs/sha256/" + Hex(manifest), '0', manifest});
  files.push_back({"index.json", '0',
                   nlohmann::json{{"schemaVersion", 2}, {"manifests", {{{"digest", Sha256Hex(manifest)}}}}}.dump()});
  return Tar(files);
}

std::set<std::string> Paths(const std::string& tar) {
  std::set<std::string> out;
  auto members = ListTar(tar);
  EXPECT_TRUE(members.ok()) << members.status().ToString();
  if (members.ok()) {
    for (const auto& m : *members) out.insert(m.path);
  }
  return out;
}

TEST(OciImageTest, DockerSaveWithWhiteoutsAndOpaqueDirs) {
  std::string base = Tar({{"a/", '5'},
                          {"a/x", '0', "x"},
                          {"a/y", '0', "y"},
                          {"b/", '5'},
                          {"b/z", '0', "z"},
                          {"home/", '5', "", "", 1000},
                          {"home/f", '0', "mine", "", 1000}});
  std::string top = Tar({{"a/.wh.x", '0'}, {"b/.wh..wh..opq", '0'}, {"b/new", '0', "n"}, {"c", '0', "c"}});
  auto image = ReadImage(DockerSave({base, Gzip(top)}));
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  ASSERT_EQ(image->layers.size(), 2u);
  EXPECT_EQ(image->config.working_dir, "/srv");
  EXPECT_EQ(image->config.user, "1000");
  EXPECT_EQ(image->config.cmd, (std::vector<std::string>{"/bin/sh", "-c", "serve"}));
  EXPECT_EQ(image->config.env.size(), 2u);
  auto flat = FlattenLayers(image->layers, {{".space-template.json", "{}"}});
  ASSERT_TRUE(flat.ok()) << flat.status().ToString();
  EXPECT_EQ(Paths(*flat),
            (std::set<std::string>{".space-template.json", "a", "a/y", "b", "b/new", "c", "home", "home/f"}));
  auto members = ListTar(*flat);
  for (const auto& m : *members) {
    if (m.path == "home/f") {
      EXPECT_EQ(m.uid, 1000u);
    }
  }
}

TEST(OciImageTest, OciLayoutChecksDigests) {
  std::string layer = Gzip(Tar({{"etc/", '5'}, {"etc/os-release", '0', "ID=test\n"}}));
  auto image = ReadImage(OciLayout({layer}));
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  auto flat = FlattenLayers(image->layers, {});
  ASSERT_TRUE(flat.ok());
  EXPECT_EQ(Paths(*flat), (std::set<std::string>{"etc", "etc/os-release"}));
  EXPECT_FALSE(ReadImage(OciLayout({layer}, /*corrupt_blob=*/true)).ok());
}

TEST(OciImageTest, LongNamesAndBigIdsSurviveFlattening) {
  const std::string long_name = "d/" + std::string(150, 'n');
  auto flat = FlattenLayers({Tar({{"d/", '5'}})}, {{long_name, "x"}});
  ASSERT_TRUE(flat.ok());
  EXPECT_TRUE(Paths(*flat).count(long_name));
}

TEST(OciImageTest, RefusesHostileImages) {
  std::vector<std::string> many;
  many.reserve(129);
  for (int i = 0; i < 129; ++i) many.push_back(Tar({{"f" + std::to_string(i), '0', "x"}}));
  std::string bomb = Gzip(Tar({{"zeros", '0', std::string(4 << 20, '\0')}}));
  std::string whole = Gzip(Tar({{"f", '0', std::string(100000, 'a')}}));
  struct Case {
    const char* what;
    std::string archive;
    size_t cap = kMaxImageBytes;
  } read_cases[] = {
      {"not an image", Tar({{"hello", '0', "x"}})},
      {"not a tar", std::string(2048, 'x')},
      {"missing layer",
       Tar({{"c.json", '0', kConfig}, {"manifest.json", '0', R"([{"Config": "c.json", "Layers": ["nope.tar"]}])"}})},
      {"too many layers", DockerSave(many)},
      {"gzip bomb over the cap", DockerSave({bomb}), 1 << 20},
      {"truncated gzip", DockerSave({whole.substr(0, whole.size() / 2)})},
      {"zstd layer", DockerSave({std::string("\x28\xb5\x2f\xfd", 4) + "rest"})},
      {"bad manifest json", Tar({{"manifest.json", '0', "{nope"}})},
      {"index without manifests", Tar({{"index.json", '0', R"({"manifests": []})"}})},
      {"blob name not a digest", Tar({{"index.json", '0', R"({"manifests": [{"digest": "sha256:../../x"}]})"}})},
  };
  for (const auto& c : read_cases) {
    EXPECT_FALSE(ReadImage(c.archive, c.cap).ok()) << c.what;
  }
  struct Layers {
    const char* what;
    std::vector<std::string> layers;
  } flatten_cases[] = {
      {"below a symlink", {Tar({{"etc", '2', "", "/etc"}, {"etc/passwd", '0', "evil"}})}},
      {"below a symlink of an earlier layer", {Tar({{"x", '2', "", "/"}}), Tar({{"x/root/owned", '0', "evil"}})}},
      {"hard link out of the image", {Tar({{"h", '1', "", "etc/shadow"}})}},
      {"hard link climbing out", {Tar({{"h", '1', "", "../../etc/shadow"}})}},
      {"device node", {Tar({{"dev/sda", '4'}})}},
      {"char device", {Tar({{"null", '3'}})}},
      {"fifo", {Tar({{"p", '6'}})}},
      {"absolute member", {Tar({{"/etc/passwd", '0', "x"}})}},
      {"dotdot member", {Tar({{"../../etc/passwd", '0', "x"}})}},
      {"hard link to a whited-out file", {Tar({{"f", '0', "x"}, {"h", '1', "", "f"}}), Tar({{".wh.f", '0'}})}},
  };
  for (const auto& c : flatten_cases) {
    EXPECT_FALSE(FlattenLayers(c.layers, {}).ok()) << c.what;
  }
}

}  // namespace
}  // namespace space::storage
