// Stop strings over streamed text: never emitted, not even in part.
#include <gtest/gtest.h>

#include "shared/error.h"
#include "worker/text/stop_matcher.h"

namespace flashq {
namespace {

TEST(StopMatcher, StopsRightBeforeAStopStringSplitAcrossPieces) {
  StopMatcher matcher({"END"});
  std::string emitted;
  for (const char* piece : {"hello E", "N", "D and more"}) {
    StopMatcher::Result r = matcher.push(piece);
    emitted += r.text;
    if (r.stopped) break;
  }
  EXPECT_EQ(emitted, "hello ");
}

TEST(StopMatcher, HoldsBackAPossiblePrefixThenReleasesIt) {
  StopMatcher matcher({"END"});
  EXPECT_EQ(matcher.push("abc EN").text, "abc ");
  StopMatcher::Result r = matcher.push("ough");
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(r.text, "ENough");
  EXPECT_EQ(matcher.push("E").text, "");
  EXPECT_EQ(matcher.flush(), "E");
}

TEST(StopMatcher, TheEarliestStopStringWins) {
  StopMatcher matcher({"zz", "b"});
  StopMatcher::Result r = matcher.push("a b zz");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "a ");
}

TEST(StopMatcher, RejectsEmptyStopStrings) { EXPECT_THROW(StopMatcher({""}), Error); }

}  // namespace
}  // namespace flashq
