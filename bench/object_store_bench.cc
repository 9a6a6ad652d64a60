// The snapshot store on S3 against a plain upload of the same bytes with the same client
// (libcurl through S3BlobStore), interleaved in one run; and stored bytes per rolling snapshot
// against the bytes that changed. Run under scripts/s3-test-cluster.sh (`make bench-object-store`).
//
//   object_store_bench [--mib N] [--rounds R] [--out FILE]
//
// Per round: export a fresh tree of N MiB of random files (full), then put the same bytes as
// 4 MiB values under fresh keys (the baseline); restore the snapshot into an empty directory,
// then get those values back (the baseline). Random bytes do not compress, so both move the
// same bytes over the wire. Prints p50/p90/p99 throughput and the ratios of the p50s.
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "common/random.h"
#include "snapshot/chunk_codec.h"
#include "snapshot/exporter.h"
#include "snapshot/gc.h"
#include "snapshot/local_blob_store.h"
#include "snapshot/manifest.h"
#include "snapshot/read_ahead_store.h"
#include "snapshot/restorer.h"
#include "snapshot/s3_blob_store.h"
#include "snapshot/write_behind_store.h"

namespace fs = std::filesystem;
using space::Result;
using space::snapshot::BlobStore;

namespace {

constexpr size_t kMiB = 1 << 20;
constexpr size_t kChunk = 4 * kMiB;

double Seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

double Pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(std::lround(p * static_cast<double>(v.size() - 1))));
  return v[i];
}

std::string RandomBytes(std::mt19937_64& rng, size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i + 8 <= n; i += 8) {
    const uint64_t v = rng();
    std::memcpy(&s[i], &v, 8);
  }
  return s;
}

void WriteFile(const std::string& path, const std::string& data) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary).write(data.data(), static_cast<std::streamsize>(data.size()));
}

[[noreturn]] void Die(const std::string& what) {
  std::cerr << "object_store_bench: " << what << "\n";
  std::exit(1);
}

std::string Getenv(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') Die(std::string(name) + " is not set (run under scripts/s3-test-cluster.sh run --)");
  return v;
}

struct Row {
  std::string what;
  std::vector<double> mib_s;
};

}  // namespace

int main(int argc, char** argv) {
  size_t mib = 96;
  int rounds = 7;
  std::string out_path;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--mib" && i + 1 < argc) {
      mib = std::stoul(argv[++i]);
    } else if (a == "--rounds" && i + 1 < argc) {
      rounds = std::stoi(argv[++i]);
    } else if (a == "--out" && i + 1 < argc) {
      out_path = argv[++i];
    } else {
      Die("usage: object_store_bench [--mib N] [--rounds R] [--out FILE]");
    }
  }
  auto loc = space::snapshot::ParseS3Location(Getenv("SPACE_TEST_S3_URL"));
  if (!loc.ok()) Die(loc.status().ToString());
  loc->prefix += "bench-" + space::RandomHex(4) + "/";
  space::snapshot::S3Credentials creds{Getenv("SPACE_TEST_S3_ACCESS_KEY"), Getenv("SPACE_TEST_S3_SECRET_KEY")};
  auto store = space::snapshot::S3BlobStore::Open(*loc, creds);
  if (!store.ok()) Die(store.status().ToString());
  BlobStore& s3 = **store;
  const std::string tmp = fs::temp_directory_path() / ("object_store_bench." + space::RandomHex(4));
  std::mt19937_64 rng(1);

  Row export_row{"export (full, tree -> S3, 4 uploads in flight)", {}},
      put_row{"baseline: Put of the same bytes, 4 MiB values", {}};
  Row put4_row{"baseline: Put of the same bytes, 4 in flight", {}};
  Row restore_row{"restore (S3 -> tree, every chunk hashed, 4 fetched ahead)", {}},
      get_row{"baseline: Get of the same values", {}};
  Row objects_row{"Get of the export's own objects (4 MiB + frame header each)", {}};
  Row local_row{"restore of the same snapshot from a local directory store", {}};
  for (int r = 0; r < rounds; ++r) {
    const std::string tree = tmp + "/tree" + std::to_string(r);
    std::vector<std::string> values;
    for (size_t f = 0; f < mib / 8; ++f) {
      std::string data = RandomBytes(rng, 8 * kMiB);
      WriteFile(tree + "/f" + std::to_string(f), data);
      values.push_back(data.substr(0, kChunk));
      values.push_back(data.substr(kChunk));
    }
    const std::string id = "bench-" + std::to_string(r);
    auto t0 = std::chrono::steady_clock::now();
    // As the node exports: chunk uploads overlap through a write-behind store.
    Result<space::snapshot::ExportStats> ex = space::InvalidArgument("not run");
    {
      space::snapshot::WriteBehindStore wb(&s3, 4);
      ex = space::snapshot::Export(tree, id, "", wb);
    }
    const double ex_s = Seconds(std::chrono::steady_clock::now() - t0);
    if (!ex.ok()) Die("export: " + ex.status().ToString());
    std::vector<std::string> keys;
    t0 = std::chrono::steady_clock::now();
    for (const auto& v : values) {
      keys.push_back(space::snapshot::ObjectKey(space::RandomHex(32)));
      if (auto st = s3.Put(keys.back(), v); !st.ok()) Die("put: " + st.ToString());
    }
    const double put_s = Seconds(std::chrono::steady_clock::now() - t0);
    std::vector<std::string> keys4;
    t0 = std::chrono::steady_clock::now();
    {
      space::snapshot::WriteBehindStore wb(&s3, 4);
      for (const auto& v : values) {
        keys4.push_back(space::snapshot::ObjectKey(space::RandomHex(32)));
        if (auto st = wb.Put(keys4.back(), v); !st.ok()) Die("put: " + st.ToString());
      }
      if (auto st = wb.Drain(); !st.ok()) Die("put: " + st.ToString());
    }
    const double put4_s = Seconds(std::chrono::steady_clock::now() - t0);
    // The export's own objects, fetched with nothing else done: a zstd frame of a 4 MiB chunk
    // of random bytes is 4 MiB + a few bytes, where the plain values are exactly 4 MiB.
    double objects_s = 0;
    {
      auto m = space::snapshot::LoadManifest(s3, id);
      if (!m.ok()) Die("manifest: " + m.status().ToString());
      t0 = std::chrono::steady_clock::now();
      for (const auto& e : m->entries) {
        for (const auto& h : e.chunks) {
          auto got = s3.Get(space::snapshot::ObjectKey(h), space::snapshot::MaxObjectSize());
          if (!got.ok()) Die("get: " + got.status().ToString());
        }
      }
      objects_s = Seconds(std::chrono::steady_clock::now() - t0);
    }
    const std::string dest = tmp + "/dest" + std::to_string(r);
    fs::create_directories(dest);
    t0 = std::chrono::steady_clock::now();
    {
      // As the node restores: the next objects are fetched ahead, in manifest order.
      auto m = space::snapshot::LoadManifest(s3, id);
      if (!m.ok()) Die("manifest: " + m.status().ToString());
      space::snapshot::ReadAheadStore ahead(&s3, space::snapshot::RestoreReadOrder(*m), 4,
                                            space::snapshot::MaxObjectSize());
      if (auto st = space::snapshot::Restore(id, ahead, dest); !st.ok()) Die("restore: " + st.ToString());
    }
    const double re_s = Seconds(std::chrono::steady_clock::now() - t0);
    t0 = std::chrono::steady_clock::now();
    for (const auto& k : keys) {
      if (auto got = s3.Get(k, kChunk + 1); !got.ok()) Die("get: " + got.status().ToString());
    }
    const double get_s = Seconds(std::chrono::steady_clock::now() - t0);
    // The same restore with no network: what hashing, decompressing and writing cost here.
    const std::string local_dest = tmp + "/local" + std::to_string(r);
    fs::create_directories(local_dest);
    double local_s = 0;
    {
      auto local = space::snapshot::LocalBlobStore::Open(tmp + "/store" + std::to_string(r));
      if (!local.ok()) Die(local.status().ToString());
      if (auto st = space::snapshot::Export(tree, id, "", **local); !st.ok())
        Die("local export: " + st.status().ToString());
      t0 = std::chrono::steady_clock::now();
      if (auto st = space::snapshot::Restore(id, **local, local_dest); !st.ok()) Die("local restore: " + st.ToString());
      local_s = Seconds(std::chrono::steady_clock::now() - t0);
    }
    fs::remove_all(local_dest);
    fs::remove_all(tmp + "/store" + std::to_string(r));
    const double m = static_cast<double>(values.size() * kChunk) / kMiB;
    export_row.mib_s.push_back(m / ex_s);
    put_row.mib_s.push_back(m / put_s);
    put4_row.mib_s.push_back(m / put4_s);
    local_row.mib_s.push_back(m / local_s);
    objects_row.mib_s.push_back(m / objects_s);
    restore_row.mib_s.push_back(m / re_s);
    get_row.mib_s.push_back(m / get_s);
    fs::remove_all(tree);
    fs::remove_all(dest);
    (void)space::snapshot::DeleteManifest(s3, id);
    for (const auto& k : keys) (void)s3.Delete(k);
    for (const auto& k : keys4) (void)s3.Delete(k);
    (void)space::snapshot::CollectGarbage(s3);
  }

  // Rolling snapshots of one tree: each round changes some bytes; stored bytes against them.
  struct Roll {
    std::string what;
    std::vector<double> ratio;
    uint64_t changed = 0, stored = 0;
  };
  Roll appends{"rolling, 6 MiB of new files per round", {}},
      inplace{"rolling, 16 writes of 64 KiB in place per round", {}};
  {
    const std::string tree = tmp + "/rolling";
    for (size_t f = 0; f < 8; ++f) WriteFile(tree + "/base" + std::to_string(f), RandomBytes(rng, 8 * kMiB));
    auto base = space::snapshot::Export(tree, "roll-0", "", s3);
    if (!base.ok()) Die("export: " + base.status().ToString());
    std::string parent = "roll-0";
    for (int r = 1; r <= 2 * rounds; ++r) {
      const bool append = r % 2 == 1;
      uint64_t changed = 0;
      if (append) {
        WriteFile(tree + "/new" + std::to_string(r), RandomBytes(rng, 6 * kMiB));
        changed = 6 * kMiB;
      } else {
        for (int w = 0; w < 16; ++w) {
          const std::string path = tree + "/base" + std::to_string(rng() % 8);
          std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
          f.seekp(static_cast<std::streamoff>(rng() % (8 * kMiB - 64 * 1024)));
          const std::string data = RandomBytes(rng, 64 * 1024);
          f.write(data.data(), static_cast<std::streamsize>(data.size()));
          changed += 64 * 1024;
        }
      }
      const std::string id = "roll-" + std::to_string(r);
      auto st = space::snapshot::Export(tree, id, parent, s3);
      if (!st.ok()) Die("export: " + st.status().ToString());
      Roll& row = append ? appends : inplace;
      row.ratio.push_back(static_cast<double>(st->bytes_written) / static_cast<double>(changed));
      row.changed += changed;
      row.stored += st->bytes_written;
      parent = id;
    }
  }
  fs::remove_all(tmp);
  const auto stats = (*store)->stats();

  char buf[512];
  std::string out;
  std::snprintf(buf, sizeof(buf),
                "| what | n | p50 MiB/s | p90 MiB/s | p99 MiB/s | p50 vs baseline |\n|---|---|---|---|---|---|\n");
  out += buf;
  auto line = [&](const Row& r, const Row& base) {
    // Throughput: the slow tail is the low percentile, so p90/p99 read from the bottom.
    std::snprintf(buf, sizeof(buf), "| %s | %zu | %.1f | %.1f | %.1f | %.2fx |\n", r.what.c_str(), r.mib_s.size(),
                  Pct(r.mib_s, 0.5), Pct(r.mib_s, 0.1), Pct(r.mib_s, 0.01), Pct(r.mib_s, 0.5) / Pct(base.mib_s, 0.5));
    out += buf;
  };
  line(export_row, put_row);
  line(put_row, put_row);
  line(put4_row, put_row);
  line(restore_row, get_row);
  line(get_row, get_row);
  line(objects_row, get_row);
  line(local_row, get_row);
  std::snprintf(buf, sizeof(buf),
                "\nExport against 4 plain Puts in flight: %.2fx. Restore from S3 against the local restore: %.2fx.\n",
                Pct(export_row.mib_s, 0.5) / Pct(put4_row.mib_s, 0.5),
                Pct(restore_row.mib_s, 0.5) / Pct(local_row.mib_s, 0.5));
  out += buf;
  out +=
      "\n| rolling snapshots | n | p50 stored/changed | p90 | p99 | all rounds stored/changed "
      "|\n|---|---|---|---|---|---|\n";
  for (const Roll* r : {&appends, &inplace}) {
    std::snprintf(buf, sizeof(buf), "| %s | %zu | %.2fx | %.2fx | %.2fx | %.2fx |\n", r->what.c_str(), r->ratio.size(),
                  Pct(r->ratio, 0.5), Pct(r->ratio, 0.9), Pct(r->ratio, 0.99),
                  static_cast<double>(r->stored) / static_cast<double>(r->changed));
    out += buf;
  }
  std::snprintf(buf, sizeof(buf),
                "\nObject store: %llu requests, %llu retries, %llu failures, %.1f MiB sent, %.1f MiB received.\n",
                static_cast<unsigned long long>(stats.requests), static_cast<unsigned long long>(stats.retries),
                static_cast<unsigned long long>(stats.failures), static_cast<double>(stats.bytes_sent) / kMiB,
                static_cast<double>(stats.bytes_received) / kMiB);
  out += buf;
  std::cout << out;
  if (!out_path.empty()) std::ofstream(out_path) << out;
  return 0;
}
