// The functions of the standalone nn-kernel test that are called from
// another of its files: the conv references and helpers the Winograd
// checks reuse, the Winograd / weight-cache checks TestConvAll runs, and
// each family's entry point, which main() runs per ISA family.
#ifndef SINGA_TEST_CPP_NN_TEST_FAMILIES_H_
#define SINGA_TEST_CPP_NN_TEST_FAMILIES_H_

#include <string>

#include "nn_test_util.h"

// test_nn_conv.cc
DVec RefConv(const DVec& x, const DVec& w, const DVec& b,
             const ConvParams& p);
void RefConvBackward(const DVec& x, const DVec& w, const DVec& dy,
                     const ConvParams& p, DVec* dx, DVec* dw, DVec* db);
void TestConv(const std::string& name, ConvParams p, bool fd);
ConvParams CP(int n, int c, int h, int w, int oc, int kh, int kw, int sh,
              int sw, int pt, int pl, int pb, int pr, int dh, int dw, int g);
void TestIm2Col();
void TestConvAll();

// test_nn_winograd.cc
void TestWinogradWeight();
void TestWinogradCases();
void TestWinogradCache();
void TestWeightCacheRules();
void TestWeightPanels();

// test_nn_pool.cc
void TestPoolAll();

// test_nn_bn.cc
void TestBatchNormAll();

#endif  // SINGA_TEST_CPP_NN_TEST_FAMILIES_H_
