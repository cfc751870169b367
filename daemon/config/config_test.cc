#include "daemon/config/config.h"
#include "daemon/config/sections.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <type_traits>

namespace htam {
namespace {

const ProgramInfo kProgram{"htamd", "test", "0.0"};

Result<Config> ParseArgs(std::vector<std::string> args, std::string* out_text = nullptr,
                         bool* exit_now_out = nullptr) {
  std::vector<const char*> argv{"htamd"};
  for (auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out;
  bool exit_now = false;
  auto r = Config::Parse(static_cast<int>(argv.size()), argv.data(), kProgram, out, &exit_now);
  if (out_text) *out_text = out.str();
  if (exit_now_out) *exit_now_out = exit_now;
  return r;
}

TEST(ConfigTest, DefaultsComeFromTheTable) {
  auto c = ParseArgs({});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->GetString("general.data_dir"), "./htam-data");
  EXPECT_EQ(c->GetString("server.bind"), "tcp://127.0.0.1:7878");
  EXPECT_EQ(c->GetInt("memory.map_size_mb"), 1024);
}

TEST(ConfigTest, CommandLineWinsOverFile) {
  std::string path = testing::TempDir() + "/htam_config_test.conf";
  {
    std::ofstream f(path);
    f << "[general]\nlog_level = debug\ndata_dir = /from/file\n[memory]\nmap_size_mb = 64\n";
  }
  auto c = ParseArgs({"--config", path, "--general.data_dir", "/from/cli"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->GetString("general.data_dir"), "/from/cli");
  EXPECT_EQ(c->GetString("general.log_level"), "debug");
  EXPECT_EQ(c->GetInt("memory.map_size_mb"), 64);
  EXPECT_EQ(c->sources().at("general.data_dir"), "command line");
  EXPECT_EQ(c->sources().at("memory.map_size_mb"), "file");
}

TEST(ConfigTest, BadInputIsAClearError) {
  auto unknown = ParseArgs({"--memory.no_such_option", "1"});
  EXPECT_FALSE(unknown.ok());
  auto bad_int = ParseArgs({"--memory.map_size_mb", "lots"});
  ASSERT_FALSE(bad_int.ok());
  EXPECT_NE(bad_int.status().message().find("memory.map_size_mb"), std::string::npos);
  auto missing = ParseArgs({"--config", "/nonexistent/htamd.conf"});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/htamd.conf"), std::string::npos);
}

TEST(ConfigTest, HelpListsEveryOptionWithItsDefault) {
  std::string text;
  bool exit_now = false;
  auto c = ParseArgs({"--help"}, &text, &exit_now);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(exit_now);
  // Help wraps long lines, even inside words: compare with all whitespace removed.
  auto squeeze = [](std::string s) {
    std::erase_if(s, [](char ch) { return ch == ' ' || ch == '\n'; });
    return s;
  };
  text = squeeze(text);
  for (const auto& spec : OptionTable()) {
    EXPECT_NE(text.find("--" + spec.name), std::string::npos) << spec.name;
    std::string def = spec.default_value.empty() ? "\"\"" : spec.default_value;
    EXPECT_NE(text.find(squeeze("default: " + def)), std::string::npos) << spec.name;
  }
}

// configs/htamd.conf must document every option with its default: it is the table's dump.
TEST(ConfigTest, ShippedConfigFileIsTheTable) {
  std::ifstream f("configs/htamd.conf");
  ASSERT_TRUE(f) << "run from the repository root";
  std::stringstream shipped;
  shipped << f.rdbuf();
  EXPECT_EQ(shipped.str(), Config::Defaults().Dump(true))
      << "regenerate with: build/daemon/htamd --dump-config > configs/htamd.conf";
}

TEST(ConfigTest, ShippedConfigFileParses) {
  auto c = ParseArgs({"--config", "configs/htamd.conf"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->Dump(false), Config::Defaults().Dump(true));
  // It sets nothing: every default stays the table's (a start logs no option line, and an
  // edited copy still follows a default a release changes).
  EXPECT_TRUE(c->sources().empty()) << c->sources().begin()->first;
}

// The dump shows a changed option as a setting and every other as a commented default; the
// dump reads back as the same configuration.
TEST(ConfigTest, DumpSetsOnlyWhatDiffersFromTheTable) {
  auto c = ParseArgs({"--eval.seeds", "7"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const std::string dump = c->Dump(false);
  EXPECT_NE(dump.find("\nseeds = 7\n"), std::string::npos);
  EXPECT_NE(dump.find("\n# data_dir = ./htam-data\n"), std::string::npos);
  const std::string path = ::testing::TempDir() + "/dumped.conf";
  {
    std::ofstream out(path);
    out << dump;
  }
  auto back = ParseArgs({"--config", path});
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->GetInt("eval.seeds"), 7);
  EXPECT_EQ(back->sources().size(), 1u);
}

}  // namespace
}  // namespace htam

// The typed sections (sections.h) hold what the table holds: every row of every section, read
// with its own type, defaults and values set from a file or the command line alike.
TEST(ConfigSections, EveryRowIsItsSectionsTypedField) {
  htam::Config c = htam::Config::Defaults();
  ASSERT_TRUE(c.Set("eval.seeds", "7").ok());
  ASSERT_TRUE(c.Set("eval.kernelbench_python", "/opt/py/bin/python3").ok());
  ASSERT_TRUE(c.Set("memory.retry_penalty", "0.25").ok());
  ASSERT_TRUE(c.Set("server.curve", "true").ok());
  const auto general = htam::config::General::From(c);
  const auto server = htam::config::Server::From(c);
  const auto memory = htam::config::Memory::From(c);
  const auto eval = htam::config::Eval::From(c);
  const auto worker = htam::config::Worker::From(c);
  const auto pool = htam::config::Pool::From(c);
  EXPECT_EQ(eval.seeds, 7);
  EXPECT_EQ(eval.kernelbench_python, "/opt/py/bin/python3");
  EXPECT_DOUBLE_EQ(memory.retry_penalty, 0.25);
  EXPECT_TRUE(server.curve);
  EXPECT_EQ(general.data_dir, "./htam-data");
  int rows = 0;
  auto same = [&](const std::string& name, const auto& field) {
    ++rows;
    using T = std::decay_t<decltype(field)>;
    if constexpr (std::is_same_v<T, std::string>)
      EXPECT_EQ(field, c.GetString(name)) << name;
    else if constexpr (std::is_same_v<T, bool>)
      EXPECT_EQ(field, c.GetBool(name)) << name;
    else if constexpr (std::is_same_v<T, double>)
      EXPECT_DOUBLE_EQ(field, c.GetDouble(name)) << name;
    else
      EXPECT_EQ(field, c.GetInt(name)) << name;
  };
#define HTAM_OPTION(section, name, type, def, help) same(#section "." #name, section.name);
#include "daemon/config/options.inc"
#undef HTAM_OPTION
  EXPECT_EQ(rows, int(htam::OptionTable().size()));
}
