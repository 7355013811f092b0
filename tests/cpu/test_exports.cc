// The ABI surface of libfusedcomm.so: exactly the public fc* functions are exported,
// the soname is libfusedcomm.so.0, and nothing links libcuda (or the shared cudart).
#include <catch2/catch_test_macros.hpp>

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string library() {
  const char* lib = getenv("FC_LIBRARY");
  if (lib == nullptr || *lib == '\0') FAIL("FC_LIBRARY is not set: run this test through meson test");
  return lib;
}

bool haveTool(const std::string& tool) {
  const std::string cmd = "command -v " + tool + " >/dev/null 2>&1";
  const int st = std::system(cmd.c_str());
  return st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

// Run a command; its stdout, and FAIL unless it exits 0.
std::string run(const std::string& tool, const std::string& args) {
  if (!haveTool(tool))
    FAIL(tool << " was not found in PATH: install binutils to run the export checks");
  const std::string cmd = tool + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) FAIL("popen(" << cmd << ") failed");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = pclose(p);
  INFO("command: " << cmd << "\noutput:\n" << out);
  REQUIRE(st != -1);
  REQUIRE(WIFEXITED(st));
  REQUIRE(WEXITSTATUS(st) == 0);
  return out;
}

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) out.push_back(l);
  return out;
}

struct Symbol {
  char type;
  std::string name;  // without any @version suffix
};

// `nm -D --defined-only` lines: "<value> <type> <name>".
std::vector<Symbol> definedDynamicSymbols(const std::string& lib) {
  std::vector<Symbol> syms;
  for (const std::string& l : lines(run("nm", "-D --defined-only '" + lib + "'"))) {
    std::istringstream in(l);
    std::string value, type, name;
    in >> value >> type >> name;
    INFO("nm line: " << l);
    REQUIRE(type.size() == 1);
    REQUIRE_FALSE(name.empty());
    name = name.substr(0, name.find('@'));
    syms.push_back({type[0], name});
  }
  return syms;
}

// The committed list (abi/fusedcomm.symbols, path in FC_SYMBOLS): names, one per
// line, '#' comments.
std::set<std::string> publicSymbols() {
  const char* path = getenv("FC_SYMBOLS");
  REQUIRE(path != nullptr);
  std::ifstream in(path);
  REQUIRE(in.good());
  std::set<std::string> names;
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#') names.insert(line);
  return names;
}

}  // namespace

TEST_CASE("only the public fc* functions are exported", "[exports]") {
  const std::string lib = library();
  const std::vector<Symbol> syms = definedDynamicSymbols(lib);
  REQUIRE_FALSE(syms.empty());

  const std::set<std::string> kPublic = publicSymbols();
  REQUIRE(kPublic.size() >= 22);
  std::set<std::string> exported;
  for (const Symbol& s : syms) {
    if (s.type == 'A') continue;  // version-node absolute symbols
    INFO("exported symbol " << s.name << " (type " << s.type << ")");
    CHECK(s.name.rfind("fc", 0) == 0);
    exported.insert(s.name);
  }
  for (const std::string& name : kPublic) {
    INFO("public function " << name);
    CHECK(exported.count(name) == 1);
  }
  // Nothing beyond the committed set (a new entry point is added there on purpose).
  for (const std::string& name : exported) {
    INFO("unexpected export " << name);
    CHECK(kPublic.count(name) == 1);
  }
  // The public functions are code.
  for (const Symbol& s : syms)
    if (kPublic.count(s.name)) {
      INFO(s.name << " has type " << s.type);
      CHECK((s.type == 'T' || s.type == 't' || s.type == 'i'));
    }
}

TEST_CASE("soname and dependencies", "[exports]") {
  const std::string lib = library();
  const std::string dyn = run("readelf", "-d '" + lib + "'");
  INFO("readelf -d:\n" << dyn);

  std::vector<std::string> sonames, needed;
  for (const std::string& l : lines(dyn)) {
    const size_t open = l.find('['), close = l.rfind(']');
    if (open == std::string::npos || close == std::string::npos || close < open) continue;
    const std::string value = l.substr(open + 1, close - open - 1);
    if (l.find("(SONAME)") != std::string::npos) sonames.push_back(value);
    if (l.find("(NEEDED)") != std::string::npos) needed.push_back(value);
  }
  REQUIRE(sonames.size() == 1);
  CHECK(sonames[0] == "libfusedcomm.so.0");
  REQUIRE_FALSE(needed.empty());  // libc at least: the parse found the entries
  for (const std::string& n : needed) {
    INFO("NEEDED " << n);
    CHECK(n.rfind("libcuda.so", 0) != 0);    // the driver is found at run time, never linked
    CHECK(n.rfind("libcudart.so", 0) != 0);  // cudart is linked statically
  }
}
