// The board's memory file: built by the server, mapped read-only by clients,
// checked for its layout.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "gpulimit/shm/board_mapping.h"

namespace gpulimit::shm {
namespace {

TEST(BoardMapping, ANewBoardIsEmptyAndWritableByItsServer) {
  std::string error;
  auto sut = BoardMapping::create(20'000, error);

  ASSERT_TRUE(sut) << error;
  ASSERT_NE(sut->writable(), nullptr);
  const BoardLayout& board = sut->layout();
  EXPECT_EQ(board.header.magic, kBoardMagic);
  EXPECT_EQ(board.header.layout_version, kBoardLayoutVersion);
  EXPECT_EQ(board.header.layout_size, sizeof(BoardLayout));
  EXPECT_EQ(board.max_devices, kBoardDevices);
  EXPECT_EQ(board.device_count.load(), 0u);
  EXPECT_EQ(board.server_pid, getpid());
  EXPECT_EQ(board.quantum_us, 20'000u);
  for (const BoardDevice& device : board.devices)
    EXPECT_EQ(device.token.load(), 0u);
}

TEST(BoardMapping, ClientsSeeTheServersWritesThroughAReadOnlyDescriptor) {
  std::string error;
  auto server = BoardMapping::create(1, error);
  ASSERT_TRUE(server) << error;
  const int fd = server->read_only_descriptor();
  ASSERT_GE(fd, 0);
  EXPECT_EQ(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDONLY);
  EXPECT_NE(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);

  auto sut = BoardMapping::map_read_only(fd, error);

  ASSERT_TRUE(sut) << error;
  EXPECT_EQ(sut->writable(), nullptr);
  server->writable()->devices[3].token.store(token_held(7));
  EXPECT_EQ(sut->layout().devices[3].token.load(), token_held(7));
}

TEST(BoardMapping, TheReadOnlyDescriptorCannotBeMappedWritableNorResized) {
  std::string error;
  auto server = BoardMapping::create(1, error);
  ASSERT_TRUE(server) << error;
  const int fd = server->read_only_descriptor();

  EXPECT_EQ(mmap(nullptr, sizeof(BoardLayout), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0),
            MAP_FAILED);
  EXPECT_NE(ftruncate(fd, 0), 0);
  struct stat status {};
  ASSERT_EQ(fstat(fd, &status), 0);
  EXPECT_EQ(status.st_mode & 0777, 0400u) << "reopening it for writing is refused";
  EXPECT_EQ(fcntl(fd, F_GET_SEALS) & (F_SEAL_SHRINK | F_SEAL_GROW), F_SEAL_SHRINK | F_SEAL_GROW);
  close(fd);
}

// A memory file holding `header` and then zeros, the size of a board.
int fake_board(const BoardHeader& header, off_t size = sizeof(BoardLayout)) {
  const int fd = memfd_create("fake-board", MFD_CLOEXEC);
  EXPECT_EQ(ftruncate(fd, size), 0);
  EXPECT_EQ(pwrite(fd, &header, sizeof header, 0), static_cast<ssize_t>(sizeof header));
  return fd;
}

TEST(BoardMapping, RefusesABoardOfAnotherLayoutNamingBoth) {
  const int fd = fake_board({kBoardMagic, kBoardLayoutVersion + 1, sizeof(BoardLayout)});
  std::string error;

  EXPECT_FALSE(BoardMapping::map_read_only(fd, error));

  EXPECT_EQ(error, "gpulimitd's board has layout 2, this library reads layout 1");
  EXPECT_EQ(fcntl(fd, F_GETFD), FD_CLOEXEC) << "left open for the caller";
  close(fd);
}

TEST(BoardMapping, RefusesWhatIsNotABoard) {
  std::string error;
  const int not_a_board = fake_board({0x1234, kBoardLayoutVersion, sizeof(BoardLayout)});
  const int wrong_size = fake_board({kBoardMagic, kBoardLayoutVersion, 64});
  const int too_short = fake_board({kBoardMagic, kBoardLayoutVersion, sizeof(BoardLayout)}, 100);

  EXPECT_FALSE(BoardMapping::map_read_only(not_a_board, error));
  EXPECT_NE(error.find("not a gpulimit board"), std::string::npos) << error;
  EXPECT_FALSE(BoardMapping::map_read_only(wrong_size, error));
  EXPECT_NE(error.find("size"), std::string::npos) << error;
  EXPECT_FALSE(BoardMapping::map_read_only(too_short, error));
  close(not_a_board);
  close(wrong_size);
  close(too_short);
}

}  // namespace
}  // namespace gpulimit::shm
