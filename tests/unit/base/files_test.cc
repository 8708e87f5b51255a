// service/base: the one bounded reader egressd reads every file with, and the quoting of
// file text in log lines (issue 38).
#include "service/base/files.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/base/log_text.h"
#include "service/base/poller.h"
#include "tests/support/wait_for.h"

namespace egress {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  return absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
}

std::string WriteFile(const std::string& name, const std::string& contents) {
  const std::string path = TempPath(name);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << contents;
  return path;
}

TEST(ReadBoundedFileTest, ARegularFileWithinTheBoundIsReadWhole) {
  const std::string path = WriteFile("small", std::string("a\0b\n", 4));
  auto text = ReadBoundedFile(path, 100);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, std::string("a\0b\n", 4));
}

TEST(ReadBoundedFileTest, AFileOfExactlyTheBoundIsRead) {
  const std::string path = WriteFile("exact", std::string(65536, 'x'));
  auto text = ReadBoundedFile(path, 65536);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(text->size(), 65536u);
}

TEST(ReadBoundedFileTest, AFileOneByteOverTheBoundIsRefusedNamingTheBound) {
  const std::string path = WriteFile("over", std::string(65537, 'x'));
  auto text = ReadBoundedFile(path, 65536);
  ASSERT_FALSE(text.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(text.status()));
  EXPECT_THAT(std::string(text.status().message()),
              HasSubstr(absl::StrCat("\"", path, "\" is larger than 65536 bytes")));
}

TEST(ReadBoundedFileTest, AnEmptyFileReadsEmpty) {
  auto text = ReadBoundedFile(WriteFile("empty", ""), 10);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "");
}

// Without O_NONBLOCK the open itself waits for a writer: this test would never return.
TEST(ReadBoundedFileTest, AFifoWithNoWriterIsRefusedWithoutBlocking) {
  const std::string path = TempPath("fifo");
  unlink(path.c_str());
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  auto text = ReadBoundedFile(path, 1 << 20);
  ASSERT_FALSE(text.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(text.status()));
  EXPECT_THAT(std::string(text.status().message()),
              HasSubstr(absl::StrCat("\"", path, "\" is a FIFO, not a regular file")));
}

TEST(ReadBoundedFileTest, DevZeroIsRefusedAsACharacterDevice) {
  auto text = ReadBoundedFile("/dev/zero", 1 << 20);
  ASSERT_FALSE(text.ok());
  EXPECT_THAT(std::string(text.status().message()),
              HasSubstr("\"/dev/zero\" is a character device, not a regular file"));
}

TEST(ReadBoundedFileTest, ADirectoryIsRefused) {
  auto text = ReadBoundedFile(std::getenv("TEST_TMPDIR"), 1 << 20);
  ASSERT_FALSE(text.ok());
  EXPECT_THAT(std::string(text.status().message()), HasSubstr("is a directory, not a file"));
}

TEST(ReadBoundedFileTest, AUnixSocketIsRefused) {
  // A socket's path must fit in sun_path: bound by a short name in the test's folder.
  ASSERT_EQ(chdir(std::getenv("TEST_TMPDIR")), 0);
  const std::string path = "socket";
  unlink(path.c_str());
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  path.copy(address.sun_path, path.size());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  auto text = ReadBoundedFile(path, 1 << 20);
  close(fd);
  ASSERT_FALSE(text.ok());
  EXPECT_THAT(std::string(text.status().message()),
              HasSubstr("\"socket\" is a socket, not a regular file"));
}

// A Kubernetes ConfigMap or Secret mounts each file as a symlink into a timestamped folder.
TEST(ReadBoundedFileTest, ASymlinkToARegularFileIsRead) {
  const std::string target = WriteFile("target", "token\n");
  const std::string link = TempPath("link");
  unlink(link.c_str());
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  auto text = ReadBoundedFile(link, 100);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "token\n");
}

TEST(ReadBoundedFileTest, AMissingFileIsNotFoundNamingThePath) {
  const std::string path = TempPath("missing");
  auto text = ReadBoundedFile(path, 100);
  ASSERT_FALSE(text.ok());
  EXPECT_TRUE(absl::IsNotFound(text.status()));
  EXPECT_THAT(std::string(text.status().message()),
              HasSubstr(absl::StrCat("cannot read \"", path, "\": No such file or directory")));
}

// /proc files say size 0 and hold more: the size is a hint, the bound is what counts.
TEST(ReadBoundedFileTest, AProcFileThatSaysSizeZeroIsReadWhole) {
  auto text = ReadBoundedFile("/proc/self/status", 1 << 20);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("VmRSS:"));
  EXPECT_FALSE(ReadBoundedFile("/proc/self/status", 10).ok());
}

TEST(FileVersionTest, AReplacedFileHasAnotherVersion) {
  const std::string path = WriteFile("versioned", "one");
  auto before = StatFileVersion(path);
  ASSERT_TRUE(before.ok());
  WriteFile("versioned.new", "two!");
  ASSERT_EQ(rename(TempPath("versioned.new").c_str(), path.c_str()), 0);
  auto after = StatFileVersion(path);
  ASSERT_TRUE(after.ok());
  EXPECT_NE(*before, *after);
  EXPECT_EQ(*after, *StatFileVersion(path));
}

TEST(QuoteForLogTest, ShortTextIsEscapedWhole) {
  EXPECT_EQ(QuoteForLog(std::string("a\0-b\n\"c\x1b", 8)), "a\\x00-b\\n\\\"c\\x1b");
}

TEST(QuoteForLogTest, LongTextIsCutAtTheBoundWithAnEllipsis) {
  const std::string quoted = QuoteForLog(std::string(1 << 20, 'A'), 200);
  EXPECT_EQ(quoted, std::string(200, 'A') + "...");
}

TEST(OneLogLineTest, ControlBytesAreEscapedAndPrintableTextStays) {
  EXPECT_EQ(OneLogLine(std::string("name \"a\"\0\r\n\x1b[2J", 15)),
            "name \"a\"\\x00\\x0d\\x0a\\x1b[2J");
}

TEST(OneLogLineTest, ALongLineIsCutAtTheBoundWithAnEllipsis) {
  EXPECT_EQ(OneLogLine(std::string(5000, 'B'), 100), std::string(100, 'B') + "...");
}

// The token watcher relies on this: a call with an unknown token wakes it at once, not a
// period later.
TEST(PollerTest, WakeAsksForAPollWithoutWaitingForThePeriod) {
  std::atomic<int> polls{0};
  Poller poller(absl::Hours(1), [&] { ++polls; });
  EXPECT_EQ(polls, 0);
  poller.Wake();
  testing::WaitFor([&] { return polls != 0; }, absl::Seconds(10));
  EXPECT_EQ(polls, 1);
}

}  // namespace
}  // namespace egress
