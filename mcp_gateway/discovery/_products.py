"""Products people name in a request, to tell "do this in Spotify" from a request the catalog serves.

"Start a Spotify playlist for running" over a gateway serving YouTube reads, word for word, like a
YouTube request: the playlist, the start, the running. The one word that says it is not is the
product's name. ``named_products`` finds the names of well-known products in a request; the index
then asks whether any searched connector is that product or mentions it (``DiscoveryIndex.find``),
and when none does, the answer is unsure and says which product is missing, so the agent can tell
its user instead of acting in the wrong place.

Only names that are not also everyday words are listed: "Slack", "Square", "Box", "Notion", "Zoom",
"Linear", "Wise" or "Outlook" name products and plain things alike ("the square root", "zoom in").
"""

from __future__ import annotations

from ._text import prose_words

__all__ = ["CONTENT", "EVERYDAY_NAMES", "PRODUCTS", "named_products", "unserved_hint"]

EVERYDAY_NAMES = frozenset("slack square box notion zoom linear wise outlook stripe plaid".split())
"""Products named by an everyday word: only the context tells "in Zoom" from "zoom in"."""

PRODUCTS: dict[str, str] = {
    word: name
    for name in """
    Airtable Asana Atlassian Basecamp Bitbucket Calendly ClickUp Confluence Dropbox Evernote Figma GitHub
    GitLab Gmail Hotmail HubSpot Intercom Jira Mailchimp Miro Okta OneDrive PagerDuty Salesforce SendGrid
    Shopify Smartsheet Todoist Trello Twilio Telnyx Webex Zendesk Freshdesk ServiceNow QuickBooks Xero
    DocuSign Typeform SurveyMonkey Mailgun Mandrill Postmark Stripe PayPal Venmo Braintree Adyen Klarna
    Coinbase Robinhood Squarespace WordPress Webflow Netlify Vercel Heroku Cloudflare Datadog Grafana
    Splunk BigQuery LaunchDarkly Spotify SoundCloud Deezer Instagram Facebook TikTok Snapchat Pinterest
    Reddit LinkedIn Twitter YouTube WhatsApp Telegram WeChat Viber Uber Lyft Airbnb DoorDash Grubhub
    UberEats Instacart Netflix Hulu Amazon eBay Etsy Alexa Siri Twitch Strava Fitbit Peloton Duolingo
    Tinder Yelp Tripadvisor Expedia Skyscanner Zillow Craigslist SharePoint OneNote PowerPoint
    """.split()
    for word in (name.lower(),)
} | {"tweet": "Twitter", "tweets": "Twitter", "retweet": "Twitter"}
"""Lowercased word -> the product's name as written: products users name, none an everyday word."""


CONTENT = frozenset(
    """link links url urls file files page pages doc docs document documents screenshot screenshots attachment
    attachments id ids number numbers handle username invite invitation notification notifications""".split()
)
"""Words after a product's name that make it what the request carries, not where it happens: "send the
Zoom link to the team", "attach the Figma file", "post the GitHub PR link" (within two words)."""


def named_products(query: str) -> dict[str, str]:
    """The products ``query`` names as where it should happen (``PRODUCTS``, not followed by a ``CONTENT``
    word), as ``{word as indexed: product name}``, in order."""
    words = prose_words(query)
    return {
        word: PRODUCTS[word]
        for i, word in enumerate(words)
        if word in PRODUCTS and CONTENT.isdisjoint(words[i + 1 : i + 3])
    }


def unserved_hint(products: list[str]) -> str:
    """What an unsure answer tells the agent when the request names products nothing here serves."""
    names = " and ".join(products)
    return (
        f"The request names {names}, which none of the searched connectors serves: if it is meant to happen "
        f"there, these hits are only look-alikes, so tell the user {names} is not connected (`connectors` "
        "lists what is)."
    )
