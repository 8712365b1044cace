// MPI_Allreduce called straight from C++: the floor under any binding, and
// what a C++ Communicator for host tensors would cost. bench/dist.py builds
// it with the mpicxx of the mpich wheel and runs it under mpiexec.
//
// Standard input: the number of timed repeats, then one message per line,
// each a list of tensor sizes in elements. A single size is reduced in
// place; several are packed into one buffer, reduced and copied back (what
// a fused all-reduce does). Rank 0 prints the best seconds per repeat.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int repeats = 0;
  std::vector<std::vector<size_t>> messages;
  if (rank == 0) {
    std::string line;
    std::getline(std::cin, line);
    repeats = std::stoi(line);
    while (std::getline(std::cin, line)) {
      std::istringstream in(line);
      std::vector<size_t> sizes;
      for (size_t n; in >> n;) sizes.push_back(n);
      if (!sizes.empty()) messages.push_back(sizes);
    }
  }
  // Rank 0 read the plan; the others receive it.
  MPI_Bcast(&repeats, 1, MPI_INT, 0, MPI_COMM_WORLD);
  unsigned long count = messages.size();
  MPI_Bcast(&count, 1, MPI_UNSIGNED_LONG, 0, MPI_COMM_WORLD);
  messages.resize(count);
  for (auto& m : messages) {
    unsigned long k = m.size();
    MPI_Bcast(&k, 1, MPI_UNSIGNED_LONG, 0, MPI_COMM_WORLD);
    m.resize(k);
    MPI_Bcast(m.data(), static_cast<int>(k), MPI_UNSIGNED_LONG, 0, MPI_COMM_WORLD);
  }

  std::vector<std::vector<std::vector<float>>> tensors;
  std::vector<std::vector<float>> packed;
  for (auto& m : messages) {
    std::vector<std::vector<float>> ts;
    size_t total = 0;
    for (size_t n : m) {
      ts.emplace_back(n, 1.0f);
      total += n;
    }
    tensors.push_back(std::move(ts));
    packed.emplace_back(m.size() > 1 ? total : 0);
  }

  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < tensors.size(); ++i) {
      auto& ts = tensors[i];
      if (ts.size() == 1) {
        MPI_Allreduce(MPI_IN_PLACE, ts[0].data(), static_cast<int>(ts[0].size()), MPI_FLOAT,
                      MPI_SUM, MPI_COMM_WORLD);
        continue;
      }
      float* buf = packed[i].data();
      size_t off = 0;
      for (auto& t : ts) {
        std::memcpy(buf + off, t.data(), t.size() * sizeof(float));
        off += t.size();
      }
      MPI_Allreduce(MPI_IN_PLACE, buf, static_cast<int>(off), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
      off = 0;
      for (auto& t : ts) {
        std::memcpy(t.data(), buf + off, t.size() * sizeof(float));
        off += t.size();
      }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, dt);
  }
  if (rank == 0) std::printf("%.9f\n", best);
  MPI_Finalize();
  return 0;
}
