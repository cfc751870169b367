// placeholder, replaced below
#include <gtest/gtest.h>
TEST(HipCompile, Placeholder) {}
