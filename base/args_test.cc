// The command-line rules every htam program shares (args.h): the subcommand's place after the
// global options, the last of a repeated option, stray words, abbreviations and option files.
#include "base/args.h"

#include <gtest/gtest.h>

#include <sstream>

namespace htam {
namespace {

namespace po = boost::program_options;

po::options_description Globals() {
  po::options_description d;
  d.add_options()("data-dir,d", po::value<std::string>(), "")("json", po::bool_switch(), "")(
      "help,h", "");
  return d;
}

TEST(FirstWord, SkipsGlobalOptionsAndTheirValues) {
  const po::options_description g = Globals();
  EXPECT_EQ(FirstWord({"-d", "/x", "--json", "status", "--limit", "3"}, g), 3u);
  EXPECT_EQ(FirstWord({"--data-dir", "/x", "status"}, g), 2u);
  EXPECT_EQ(FirstWord({"--data-dir=/x", "status"}, g), 1u);
  EXPECT_EQ(FirstWord({"--json", "status"}, g), 1u);  // a switch takes no value
  EXPECT_EQ(FirstWord({"--help"}, g), 1u);
  EXPECT_EQ(FirstWord({}, g), 0u);
}

TEST(ParseOptions, TheLastOfARepeatedOptionWinsAndStrayWordsAreErrors) {
  const po::options_description g = Globals();
  po::variables_map vm;
  ASSERT_TRUE(ParseOptions({"-d", "/a", "--data-dir", "/b"}, g, &vm).ok());
  EXPECT_EQ(vm["data-dir"].as<std::string>(), "/b");
  po::variables_map stray;
  Status st = ParseOptions({"--json", "status"}, g, &stray);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("'status'"), std::string::npos) << st.message();
  po::variables_map guessed;
  st = ParseOptions({"--data", "/x"}, g, &guessed);  // never abbreviated
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("--data"), std::string::npos) << st.message();
}

TEST(ParseOptions, HelpSkipsTheRequiredOptionsAndOrderIsKept) {
  po::options_description d;
  d.add_options()("task", po::value<std::string>()->required(), "")(
      "files", po::value<std::vector<std::string>>()->composing(), "")("help,h", "");
  po::positional_options_description pos;
  pos.add("files", -1);
  po::variables_map help;
  EXPECT_TRUE(ParseOptions({"--help"}, d, &help, &pos).ok());
  po::variables_map missing;
  EXPECT_FALSE(ParseOptions({"a.cpp"}, d, &missing, &pos).ok());
  po::variables_map vm;
  std::vector<po::option> order;
  ASSERT_TRUE(ParseOptions({"a.cpp", "--task", "t", "b.cpp"}, d, &vm, &pos, &order).ok());
  ASSERT_EQ(order.size(), 3u);
  EXPECT_EQ(order[0].value.front(), "a.cpp");
  EXPECT_EQ(order[1].string_key, "task");
  EXPECT_EQ(order[2].value.front(), "b.cpp");
}

TEST(ParseOptionFile, SectionsNameOptionsAndUnknownOnesAreErrors) {
  po::options_description d;
  d.add_options()("general.data_dir", po::value<std::string>(), "");
  std::istringstream good("# a comment\n[general]\ndata_dir = /srv/htam\n");
  po::variables_map vm;
  ASSERT_TRUE(ParseOptionFile(good, d, &vm).ok());
  EXPECT_EQ(vm["general.data_dir"].as<std::string>(), "/srv/htam");
  std::istringstream bad("[general]\nno_such = 1\n");
  po::variables_map vm2;
  Status st = ParseOptionFile(bad, d, &vm2);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("no_such"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace htam
