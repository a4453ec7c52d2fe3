import SyncKit
import Testing
import TestSupport
@testable import kvtool

@Suite struct DumpCatalogTests {
    /// The dump parser spells out History's collection names (it is also compiled without SyncKit,
    /// for the fuzz harness): they must be SyncKit's.
    @Test(.blockingWork) func theHistoryCollectionsAreSyncKits() {
        #expect(DumpCatalog.historyCollections == History.collectionNames)
    }
}
