# Writes OUT, a C++ source holding the binary schema IN (flatc --binary --schema) as a byte array
# behind the function NAME declared in schema/bfbs.h. Run with cmake -P by schema/CMakeLists.txt.
file(READ ${IN} hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
file(WRITE ${OUT}
     "// Generated from ${IN} by schema/embed_bfbs.cmake; do not edit.\n"
     "#include \"htam/schema/bfbs.h\"\n\n"
     "namespace htam::fb {\n"
     "namespace {\n"
     "alignas(16) const unsigned char kData[] = {${bytes}};\n"
     "}  // namespace\n"
     "std::span<const uint8_t> ${NAME}() { return {kData, sizeof kData}; }\n"
     "}  // namespace htam::fb\n")
